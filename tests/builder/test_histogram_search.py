"""The histogram observer's range search (:mod:`etlens.builder.histogram_search`) answers as torchao's own.

Bit for bit: the same ``(new_min, new_max)`` tensors as the observer class's original method on histograms
of many shapes (normal, uniform, skewed, heavy-tailed, outliers, one value, a few integers, ReLU'd) in both
int8 flavours, and the same quantized model (converted code, scales and outputs) when a real quantizer
converts with one or the other.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
observer_mod = pytest.importorskip("torchao.quantization.pt2e.observer")

from etlens.builder import histogram_search  # noqa: E402

KINDS = ["normal", "uniform", "cubed", "outliers", "relu", "constant", "integers", "student_t"]


def _data(kind: str, n: int, g: torch.Generator) -> torch.Tensor:
    if kind == "normal":
        return torch.randn(n, generator=g)
    if kind == "uniform":
        return torch.rand(n, generator=g) * 10 - 2
    if kind == "cubed":
        return torch.randn(n, generator=g) ** 3
    if kind == "outliers":
        return torch.cat([torch.randn(n, generator=g), torch.tensor([100.0, -50.0])])
    if kind == "relu":
        return torch.relu(torch.randn(n, generator=g))
    if kind == "constant":
        return torch.full((n,), 3.0)
    if kind == "integers":
        return torch.randint(0, 4, (n,), generator=g).float()
    return torch.randn(n, generator=g) / torch.sqrt(torch.rand(n, generator=g) + 1e-3)  # heavy tails


def _original(obs):
    return histogram_search.original(obs)(obs)


@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
@pytest.mark.parametrize("kind", KINDS)
def test_same_range_as_the_original(kind, dtype):
    g = torch.Generator().manual_seed(KINDS.index(kind))
    for n in (16, 3000):
        obs = observer_mod.HistogramObserver(dtype=getattr(torch, dtype))
        x = _data(kind, n, g)
        obs(x)
        obs(x * 1.3 + 0.1)  # a second batch widens the range: the histogram is re-binned
        want = _original(obs)
        got = histogram_search.search(obs)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (kind, n, got, want)


def test_bounds_compare_in_float32():
    # torch compares a float32 element with a Python float in float32: 2**24 + 1 rounds to 2**24
    assert histogram_search._f32(2.0 ** 24 + 1) == 2.0 ** 24
    assert not (torch.tensor(2.0 ** 24) < 2.0 ** 24 + 1)
    assert histogram_search._f32(1e39) == float("inf")


def test_install_is_idempotent_and_reversible():
    cls = observer_mod.HistogramObserver
    own = cls.__dict__["_non_linear_param_search"]
    histogram_search.uninstall()
    before = cls.__dict__["_non_linear_param_search"]
    try:
        histogram_search.install()
        histogram_search.install()
        assert cls.__dict__["_non_linear_param_search"] is histogram_search.search
        assert histogram_search.original(cls()) is before
        histogram_search.uninstall()
        assert cls.__dict__["_non_linear_param_search"] is before
    finally:
        if getattr(own, "etlens_histogram_search", False):
            histogram_search.install()


@pytest.mark.executorch
def test_quantized_model_is_the_same(monkeypatch):
    """XNNPACK's static int8 config observes activations with histograms: the converted model is identical."""
    pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
    from etlens.builder.quantize import quantize_pt2e

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    inputs = (torch.randn(4, 16) * 3,)
    calib = [(torch.randn(4, 16) * s,) for s in (1.0, 2.5, 0.3)]
    ep = torch.export.export(model, inputs)

    q = quantize_pt2e(model, inputs, "xnnpack", exported=ep, calibration=calib)  # installs the search
    assert observer_mod.HistogramObserver.__dict__["_non_linear_param_search"] is histogram_search.search
    monkeypatch.setattr(histogram_search, "install", lambda: None)
    histogram_search.uninstall()
    try:
        ref = quantize_pt2e(model, inputs, "xnnpack", exported=ep, calibration=calib)
    finally:
        histogram_search.install()
    assert q.code == ref.code
    state, ref_state = q.state_dict(), ref.state_dict()
    assert state.keys() == ref_state.keys()
    assert all(torch.equal(state[k], ref_state[k]) for k in state)
    x = torch.randn(4, 16)
    assert torch.equal(q(x), ref(x))

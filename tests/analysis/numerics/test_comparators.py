"""Each comparator: against ExecuTorch's (MSE, L1, SNR) or by hand (cosine, max_abs); bf16/fp16; errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from etlens.analysis.comparators import (COMPARATORS, CosineComparator, L1Comparator, MaxAbsComparator,
                                          MSEComparator, NumericalComparatorBase, SNRComparator,
                                          UnknownMetricError, get_comparator)
from etlens.errors import EtlensError



@pytest.fixture(scope="module")
def nc():
    """ExecuTorch's numerical comparators (imported when a test asks: the import costs ~10 CPU-s)."""
    return pytest.importorskip("executorch.devtools.inspector.numerical_comparator")


def _pairs():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 5, generator=g)
    yield a, a + 1e-3 * torch.randn(3, 5, generator=g)
    yield a, a.clone()
    yield torch.zeros(4), torch.ones(4)
    yield a, torch.randn(5, generator=g)  # broadcast, as ExecuTorch does
    yield torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([1.0, 0.0, float("nan")])
    yield 3.0, torch.tensor(2.5)


@pytest.mark.parametrize("ours_cls,theirs_name", [(MSEComparator, "MSEComparator"), (L1Comparator, "L1Comparator"),
                                                  (SNRComparator, "SNRComparator")])
def test_matches_executorch(nc, ours_cls, theirs_name):
    theirs = getattr(nc, theirs_name)()
    ours = ours_cls()
    for a, b in _pairs():
        x, y = theirs.element_compare(a, b), ours.element_compare(a, b)
        assert (math.isnan(x) and math.isnan(y)) or x == y or abs(x - y) <= 1e-9 * max(abs(x), abs(y)), (x, y)


def test_values_by_hand():
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.5, 1.0])
    assert MSEComparator().element_compare(a, b) == pytest.approx((0 + 0.25 + 4) / 3, rel=1e-15)
    assert L1Comparator().element_compare(a, b) == pytest.approx(2.5, rel=1e-15)
    assert MaxAbsComparator().element_compare(a, b) == 2.0
    cos = float(np.dot([1, 2, 3], [1, 2.5, 1]) / (np.linalg.norm([1, 2, 3]) * np.linalg.norm([1, 2.5, 1])))
    assert CosineComparator().element_compare(a, b) == pytest.approx(cos, rel=1e-15)
    assert SNRComparator().element_compare(a, a) == math.inf
    # both all-zero: the ratio is 0/0, the values are equal: reported as equal, never a crossing
    zero_snr = SNRComparator().element_compare(torch.zeros(3), torch.zeros(3))
    assert zero_snr == math.inf and not SNRComparator().crosses(zero_snr, 15.0)
    assert SNRComparator().element_compare(torch.zeros(3), a) == -math.inf  # all-zero reference, values differ
    assert CosineComparator().element_compare(torch.zeros(3), torch.zeros(3)) == 1.0
    assert CosineComparator().element_compare(torch.zeros(3), a) == 0.0
    assert CosineComparator().element_compare(a, -a) == pytest.approx(-1.0)
    assert MaxAbsComparator().element_compare(torch.zeros(0), torch.zeros(0)) == 0.0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("cls", list(COMPARATORS.values()))
def test_low_precision_tensors(cls, dtype):
    a = torch.linspace(-2, 2, 17)
    b = (a + 0.01).to(dtype)
    got = cls().element_compare(a.to(dtype), b)
    ref = cls().element_compare(a.to(dtype).to(torch.float64), b.to(torch.float64))
    assert got == ref and math.isfinite(got)


def test_equal_element_counts_are_compared_in_memory_order():
    a = torch.arange(32.0).reshape(1, 8, 4)
    b = torch.arange(32.0).reshape(1, 4, 8)  # same data, the runtime skipped a free view
    assert MSEComparator().element_compare(a, b) == 0.0
    # (8, 1) vs (1, 8) would broadcast to 64 wrong pairs
    assert MSEComparator().element_compare(torch.arange(8.0).reshape(8, 1), torch.arange(8.0).reshape(1, 8)) == 0.0


def test_incompatible_shapes_raise_value_error():
    with pytest.raises(ValueError, match="cannot compare shapes"):
        MSEComparator().element_compare(torch.zeros(3), torch.zeros(4))


def test_get_comparator():
    assert isinstance(get_comparator("mse"), MSEComparator)
    assert isinstance(get_comparator(" Max_Abs "), MaxAbsComparator)
    assert isinstance(get_comparator("COSINE"), CosineComparator)
    custom = MSEComparator()
    assert get_comparator(custom, inspector="insp") is custom and custom.inspector == "insp"
    with pytest.raises(UnknownMetricError, match="Unsupported distance metric") as info:
        get_comparator("KL")
    assert isinstance(info.value, EtlensError) and isinstance(info.value, ValueError)


def test_crosses_direction():
    assert MSEComparator().crosses(0.2, 0.1) and not MSEComparator().crosses(0.05, 0.1)
    assert SNRComparator().crosses(20.0, 30.0) and not SNRComparator().crosses(40.0, 30.0)
    assert MSEComparator().crosses(float("nan"), 1.0)


def test_custom_comparator_preprocessing_and_element_compare():
    class Scaled(NumericalComparatorBase):
        name = "scaled"

        def preprocessing(self, mapping):
            return {k: (h, v * 2) for k, (h, v) in mapping.items()}

        def element_compare(self, a, b):
            return float((b - a).abs().max())

    a = torch.ones(3)
    mapping = {((1,), a): ((1,), torch.ones(3))}
    df = Scaled().compare(mapping, {(1,): ["op"]}, {(1,): ["rt"]})
    assert list(df.columns) == ["aot_debug_handle", "aot_ops", "aot_intermediate_output", "runtime_ops",
                                "runtime_debug_handle", "runtime_intermediate_output", "gap"]
    assert df.gap[0] == [1.0] and df.aot_ops[0] == ["op"] and df.runtime_ops[0] == ["rt"]


def test_bad_preprocessing_output_is_rejected():
    class Bad(MSEComparator):
        def preprocessing(self, mapping):
            return [1, 2]

    with pytest.raises(TypeError, match="must return a dict"):
        Bad().compare({}, {}, {})

"""Fixtures for the pass-tracer tests: each expensive trace is built once per session."""

from __future__ import annotations

import pytest



def _has_executorch() -> bool:
    try:
        import executorch.exir  # noqa: F401
    except Exception:
        return False
    return True


HAS_EXECUTORCH = _has_executorch()
requires_executorch = pytest.mark.skipif(not HAS_EXECUTORCH, reason="needs the executorch extra")


@pytest.fixture(scope="session")
def cnn_xnnpack(tmp_path_factory):
    """``(trace, path)``: the demo CNN traced for XNNPACK (all passes + lowering), written to JSON."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra")
    import etlens
    from etlens.demos import get_demo

    model, inputs = get_demo("cnn")
    path = tmp_path_factory.mktemp("trace") / "cnn.xnnpack.json"
    trace = etlens.trace_passes(model, inputs, backend="xnnpack", output=str(path), name="cnn")
    return trace, str(path)


@pytest.fixture(scope="session")
def mlp_aten(tmp_path_factory):
    """``(trace, path)``: the demo MLP traced with the pure-torch ``aten`` backend."""
    import etlens
    from etlens.demos import get_demo

    model, inputs = get_demo("mlp")
    path = tmp_path_factory.mktemp("trace") / "mlp.aten.json"
    trace = etlens.trace_passes(model, inputs, backend="aten", output=str(path), name="mlp")
    return trace, str(path)

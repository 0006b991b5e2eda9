"""A report builds its model once: one export (+ one pt2e quantization), one lowering, in one child.

``report_from_model`` goes through :class:`etlens.builder.session.BuildSession`; these tests count
what the etlens process does (``torch.export.export`` calls, quantizations, any lowering in this
process) and what the session's worker child was asked to do.
"""

from __future__ import annotations

import pytest

from tests.conftest import requires_executorch


@requires_executorch
@pytest.mark.slow
def test_report_exports_quantizes_and_lowers_once(tmp_path, monkeypatch):
    import executorch.exir
    import torch

    import etlens.builder.quantize as quantize_mod
    from etlens.demos import get_demo
    from etlens.report import report_from_model

    exports, quantizations = [], []
    real_export, real_quantize = torch.export.export, quantize_mod.quantize_pt2e

    def counting_export(*args, **kwargs):
        exports.append(type(args[0]).__name__)
        return real_export(*args, **kwargs)

    def counting_quantize(*args, **kwargs):
        quantizations.append(1)
        return real_quantize(*args, **kwargs)

    def no_lowering_here(*args, **kwargs):
        raise AssertionError("the etlens process lowered a program: lowering belongs in the worker child")

    monkeypatch.setattr(torch.export, "export", counting_export)
    monkeypatch.setattr(quantize_mod, "quantize_pt2e", counting_quantize)
    monkeypatch.setattr(executorch.exir, "to_edge_transform_and_lower", no_lowering_here)

    model, inputs = get_demo("mlp")
    res = report_from_model(model.eval(), inputs, str(tmp_path / "r.html"), name="mlp", quantize=True, runs=2,
                            progress=False)
    session = res.session
    assert session.counts == {"export": 2, "quantize": 1, "lower": 1, "run": 1}
    assert len(quantizations) == 1
    # the model, its quantized module, then one instrumented build of the inside-delegates view
    # (torchao's pattern matcher exports its own small WrapperModule patterns while quantizing)
    assert [e for e in exports if e != "WrapperModule"] == ["MLP", "GraphModule", "GraphModule"], exports
    assert session._worker is None  # the child was stopped at the end of the report
    # the trace's last stage is the lowering that wrote the .pte: its delegate is in the program
    trace = res.data.inputs.trace
    assert [s.stage for s in trace.snapshots][:3] == ["quantize", "export", "to_edge"]
    assert trace.snapshots[-1].stage == "lower" and trace.failed is None
    lowered = trace.snapshots[-1].graph
    assert any(True for _ in lowered.delegates())
    assert res.data.inside is not None and res.data.inside.method["cycles"] == 1


@requires_executorch
def test_session_uses_one_child_for_build_and_inside_cycles(tmp_path):
    from etlens.demos import get_demo
    from etlens.builder.session import BuildSession
    from etlens.builder.inside import inside_delegates

    model, inputs = get_demo("mlp")
    with BuildSession(model.eval(), inputs, name="mlp", trace=True) as s:
        arts = s.build(str(tmp_path), runs=1)
        res = inside_delegates(s.model, s.inputs, observe=False, progress=False, session=s)
        assert s.worker.children == 1
        assert s.worker.by_job == {"lower": 2, "run": 2}
        assert s.counts == {"export": 1, "quantize": 0, "lower": 1, "run": 1}
    assert res.rows and all(r["inside_delegate"] for r in res.rows)
    assert (tmp_path / "mlp.trace.json").exists() and s.trace.snapshots[-1].stage == "lower"
    with open(arts.pte, "rb") as f:
        assert f.read(8)[4:8] == b"ET12"


@requires_executorch
@pytest.mark.slow
def test_inside_view_raced_on_a_second_child_gives_the_same_rows(tmp_path, monkeypatch):
    """ETLENS_INSIDE_CHILD=1 forces the inside view onto a second child started when the build's
    child begins lowering; =0 keeps it in the session's child: same rows, one lowering each."""
    from etlens.demos import get_demo
    from etlens.report import report_from_model

    model, inputs = get_demo("mlp")
    got = {}
    for mode in ("1", "0"):
        monkeypatch.setenv("ETLENS_INSIDE_CHILD", mode)
        res = report_from_model(model.eval(), inputs, str(tmp_path / f"r{mode}.html"), name="mlp", runs=1,
                                progress=False)
        inside = res.data.inside
        assert inside is not None and inside.method["cycles"] == 1
        assert res.session.counts["lower"] == 1
        got[mode] = inside
    assert got["1"].method["child"].startswith("second child")
    assert got["0"].method["child"] == "the session's child"
    rows1 = [(r["node"], r["inside_delegate"], r["gap"]) for r in got["1"].rows]
    rows0 = [(r["node"], r["inside_delegate"], r["gap"]) for r in got["0"].rows]
    assert rows1 and rows1 == rows0

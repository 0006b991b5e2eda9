"""The Arm backend's own passes, traced inside its preprocess (``etlens.passes.preprocess``).

The ``ethosu_small`` builds record the trace during their one real compile (no extra Vela run):
``export``, ``partition 0`` (the sub-program the backend received), one snapshot per pass of the
Arm TOSA pipeline, then ``lower``. The passes are checked against what they are known to do and
against the TOSA graph the backend serialized (the sidecar's ``tosa_ops``).
"""

from __future__ import annotations

import pytest

from etlens.model.trace import Trace
from etlens.backends.ethosu.vela import read_sidecar


def _changes(s) -> int:
    return sum(len(s.diff[k]) for k in ("added", "removed", "rewritten", "replaced"))


def _targets(graph, names) -> list[str]:
    return [graph.get(n).target or "" for n in names if graph.get(n) is not None]


def test_arm_passes_are_snapshots_with_real_graph_changes(ethosu_small):
    for key, case in ethosu_small.items():
        tr = Trace.load(case.trace)
        stages = [s.stage for s in tr.snapshots]
        assert stages[0] == "export" and stages[1] == "partition" and stages[-1] == "lower", (key, stages[:3])
        assert stages.count("partition") == 1 and tr.failed is None, key  # the CNN has one NPU partition
        passes = [s for s in tr.snapshots if s.stage == "pass"]
        by_name = {s.name: s for s in passes}
        assert len(passes) > 100, (key, len(passes))  # the Arm TOSA pipeline: ~146 passes in ExecuTorch 1.5.1
        assert all(s.wall_time_s >= 0 and s.modified is not None for s in passes)

        # the partition: what the backend received, without the CPU's argmax
        part = tr.snapshots[1]
        assert not any("argmax" in (n.target or "") for n in part.graph), key
        # q/dq folded into the operators' annotations: the quantize/dequantize nodes go
        fold = by_name["FoldAndAnnotateQParamsPass"]
        assert fold.nodes_delta < 0 and any("quantize" in t for t in _targets(
            tr[fold.index - 1].graph, fold.diff["removed"] + fold.diff["replaced"])), key
        # convolutions rewritten to TOSA conv2d (+ rescales)
        conv = by_name["RewriteConvPass"]
        assert _changes(conv) and any("tosa" in t.lower() and "conv2d" in t.lower()
                                      for t in _targets(conv.graph, conv.diff["added"])), key
        # ExirToTosaPass turns the remaining edge operators into TOSA operators
        to_tosa = by_name["ExirToTosaPass"]
        before = {n.target for n in tr[to_tosa.index - 1].graph if n.kind == "op"}
        after = {n.target for n in to_tosa.graph if n.kind == "op"}
        assert _changes(to_tosa) and any(t.startswith("aten") for t in before), key
        assert not any(t.startswith("aten") for t in after), (key, sorted(after))
        # rescales inserted around int32 arithmetic
        assert _changes(by_name["InsertRescaleInt32Pass"]) and by_name["InsertRescaleInt32Pass"].nodes_delta > 0

        # the last pass's graph is the one the backend serialized to TOSA for Vela
        serialized = {o["node"] for p in read_sidecar(case.vela).partitions for o in p.tosa_ops}
        assert serialized and serialized <= {n.name for n in passes[-1].graph}, key

        # `lower` is diffed against the whole program before it (named as the diff's base), so the
        # delegation diff and the lineage of the CPU nodes are as for the other backends
        low = tr.snapshots[-1]
        assert low.diff.get("base") == "export" and low.diff.get("delegated"), key
        argmax = next(n.name for n in low.graph if "argmax" in (n.target or ""))
        assert tr.lineage(argmax)[-1].snapshot == "export", key
        # and a TOSA operator's lineage walks back through the Arm passes to the model's source line
        conv_node = next(n for n in passes[-1].graph if "conv2d" in (n.target or "").lower())
        hops = tr.lineage(conv_node.name, passes[-1].name)
        assert len(hops) > 1 and "models.py" in (hops[-1].source_line or ""), [h.snapshot for h in hops]


def test_vela_fast_scratch_is_kept(ethosu_small):
    """Vela's raw output carries the fast scratch (0 in the default Shared_Sram / Sram_Only modes)."""
    for key, case in ethosu_small.items():
        sc = read_sidecar(case.vela)
        for p in sc.partitions:
            assert p.memory["scratch_fast_bytes"] == 0 and p.fast_scratch_bytes == 0, (key, p.memory)
            assert p.memory["scratch_bytes"] > 0
        assert sc.totals()["fast_scratch_bytes"] == 0


def test_a_damaged_sidecar_memory_field_is_a_clear_error():
    from etlens.errors import FormatError
    from etlens.backends.ethosu.vela import parse_sidecar

    summary = "cycles_total,sram_memory_used\n10,1.0\n"
    doc = {"format": "etlens-vela", "version": 1, "target": "ethos-u55-128",
           "partitions": [{"index": 0, "summary_csv": summary, "memory": {"scratch_fast_bytes": -4}}]}
    with pytest.raises(FormatError, match=r"partitions\[0\]\.memory"):
        parse_sidecar(doc, "m.vela.json")
    doc["partitions"][0]["memory"] = {"scratch_bytes": 1024, "scratch_fast_bytes": 256}
    sc = parse_sidecar(doc, "m.vela.json")
    assert sc.partitions[0].fast_scratch_bytes == 256 and sc.totals()["fast_scratch_bytes"] == 256
    del doc["partitions"][0]["memory"]  # a sidecar written before etlens kept Vela's memory figures
    assert parse_sidecar(doc, "m.vela.json").totals()["fast_scratch_bytes"] is None


@pytest.mark.slow
def test_a_failing_arm_pass_is_recorded_by_name(monkeypatch):
    """A pass that raises inside the backend's preprocess becomes a failed ``pass`` snapshot named after it
    (the program as it left it, the traceback), and the ``lower`` stage fails after it (no Vela run; 41 s wall
    at load 9 on 2 cores)."""
    from tests.conftest import HAS_EXECUTORCH

    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra")
    import etlens
    from executorch.backends.arm._passes.rewrite_conv_pass import RewriteConvPass
    from tests.ethosu.models import build_cnn

    def planted(self, graph_module):
        raise ValueError("planted failure in RewriteConvPass")

    monkeypatch.setattr(RewriteConvPass, "call", planted)
    model, inputs = build_cnn()
    tr = etlens.trace_passes(model, inputs, backend="ethos-u55-128", quantize=True, progress=False)
    failed = tr.failed
    assert failed is not None and failed.stage == "pass" and failed.name == "RewriteConvPass", failed
    assert "inside the backend's preprocess" in failed.error["message"]
    assert "planted failure" in failed.error["traceback"] and len(failed.graph) > 10
    assert tr.snapshots[-1].stage == "lower" and tr.snapshots[-1].error is not None
    assert "FoldAndAnnotateQParamsPass" in tr.pass_names()  # the passes before it were recorded

"""Beyond ExecuTorch: get_op_list, TensorBoard, Perfetto timelines, the CLI, numerics hooks."""

from __future__ import annotations

import json
import warnings

import pytest

from tests.conftest import requires_executorch

import etlens
from etlens.cli.main import main


@pytest.fixture(scope="module")
def insp(committed):
    art = committed["mlp_portable"]
    return etlens.Inspector(etdump_path=art.etdump, etrecord=art.etrecord, debug_buffer_path=art.debug_buffer)


def test_get_op_list(insp):
    ops = insp.get_op_list("Execute")
    assert "aten.addmm.default" in ops
    for op, events in ops.items():
        assert events and all(op in e.op_types for e in events)
        assert all(e.name != "OPERATOR_CALL" for e in events)
    with pytest.raises(etlens.EtlensError, match="no event block"):
        insp.get_op_list("Nope")


@requires_executorch
def test_get_op_list_delegated(artifacts):
    art = artifacts["mixed_xnnpack"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        i = etlens.Inspector(etdump_path=art.etdump, etrecord=art.etrecord)
    with_delegated = i.get_op_list("Execute")
    without = i.get_op_list("Execute", show_delegated_ops=False)
    assert "aten.cumsum.default" in without and "aten.linear.default" in without  # via DELEGATE_CALL op types
    assert any(e.is_delegated_op for evs in with_delegated.values() for e in evs)
    assert not any(e.is_delegated_op for evs in without.values() for e in evs)


def test_tensorboard_artifact_readable(insp, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    insp.write_tensorboard_artifact(str(tmp_path / "tb"))
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "Execute/event_avg_ms" in tags
    op_tags = [t for t in tags if t.startswith("Execute/op_total_ms/")]
    assert any("addmm" in t for t in op_tags)
    runs = acc.Scalars("Execute/run_total_ms")
    assert len(runs) == 3 and all(s.value > 0 for s in runs)


def _check_nesting(trace):
    by_tid = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            assert e["dur"] >= 0 and "name" in e and "ts" in e
            by_tid.setdefault(e["tid"], []).append(e)
    depth_max = 0
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - 1e-9:
                stack.pop()
            if stack:  # strictly inside the enclosing slice
                p = stack[-1]
                assert e["ts"] >= p["ts"] - 1e-9 and e["ts"] + e["dur"] <= p["ts"] + p["dur"] + 1e-9
            stack.append(e)
            depth_max = max(depth_max, len(stack))
    return by_tid, depth_max


def test_perfetto_trace_nested(insp, tmp_path):
    path = tmp_path / "t.json"
    insp.write_perfetto_trace(str(path))
    trace = json.loads(path.read_text())
    by_tid, depth = _check_nesting(trace)
    assert len(by_tid) == 4  # Default + 3 Execute runs
    assert depth >= 3  # Method::execute > OPERATOR_CALL > native_call_*
    names = {e["name"] for e in trace["traceEvents"]}
    assert {"Method::execute", "OPERATOR_CALL"} <= names
    assert any("op_types" in e.get("args", {}) for e in trace["traceEvents"])


@requires_executorch
def test_perfetto_delegate_children(artifacts, tmp_path):
    art = artifacts["mixed_xnnpack"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        i = etlens.Inspector(etdump_path=art.etdump, etrecord=art.etrecord)
    from etlens.views.perfetto import perfetto_trace

    trace = perfetto_trace(i)
    by_tid, _ = _check_nesting(trace)
    for evs in by_tid.values():
        calls = [e for e in evs if e["name"] == "DELEGATE_CALL"]
        inner = [e for e in evs if e.get("cat") == "delegate"]
        for e in inner:  # every delegate-internal event sits inside a DELEGATE_CALL
            assert any(c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] for c in calls)
    assert any(e.get("cat") == "delegate" for e in trace["traceEvents"])


def test_cli_table_and_summary(committed, capsys):
    art = committed["mlp_portable"]
    rc = main(["inspect", "--etdump", art.etdump, "--etrecord", art.etrecord, "--debug-buffer", art.debug_buffer])
    out = capsys.readouterr().out
    assert rc == 0
    assert "native_call_addmm.out" in out and "OPERATOR_CALL" not in out
    assert "block 'Execute' (3 runs" in out and "Top operators" in out and "Delegated share" in out


@pytest.mark.parametrize("fmt,sep", [("tsv", "\t"), ("csv", ",")])
def test_cli_tsv_csv(committed, tmp_path, capsys, fmt, sep):
    import pandas as pd

    art = committed["mlp_portable"]
    out = tmp_path / f"o.{fmt}"
    assert main(["inspect", "--etdump", art.etdump, "--format", fmt, "-o", str(out)]) == 0
    df = pd.read_csv(out, sep=sep)
    assert "event_name" in df.columns and "p50 (ms)" in df.columns and len(df) > 3
    assert "wrote" in capsys.readouterr().out


def test_cli_json_and_perfetto(committed, tmp_path, capsys):
    art = committed["mlp_xnnpack"]
    trace = tmp_path / "trace.json"
    assert main(["inspect", "--etdump", art.etdump, "--etrecord", art.etrecord, "--format", "json",
                 "--perfetto", str(trace)]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert any(r["event_name"] == "DELEGATE_CALL" and r["delegate_backend_name"] == "XnnpackBackend" for r in rows)
    assert "Top operators" in captured.err
    assert json.loads(trace.read_text())["traceEvents"]


def test_cli_bad_input(tmp_path, capsys):
    p = tmp_path / "x.etdp"
    p.write_bytes(b"\x10\x00\x00\x00" + b"\x00" * 4 + b"NOPE" + b"\x00" * 8)
    assert main(["inspect", "--etdump", str(p)]) == 1
    assert "not an ETDump" in capsys.readouterr().err
    assert main(["inspect", "--etdump", str(tmp_path / "missing.etdp")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_runtime_intermediate_outputs(insp):
    import torch

    outs = insp.runtime_intermediate_outputs()
    assert outs and all(o.name != "OPERATOR_CALL" for o in outs)
    o = outs[0]
    assert o.debug_handles and o.op_types
    assert all(isinstance(t, torch.Tensor) for t in o.outputs)


def test_summary_paragraph_and_public_names(insp):
    text = insp.summary_text()
    assert text.count("block '") == 2 and "ms" in text
    from etlens import compat as mod

    assert {"Inspector", "Event", "EventBlock", "PerfData", "TimeScale"} <= set(mod.__all__)
    assert etlens.PerfData is mod.PerfData and etlens.Inspector is mod.Inspector


def test_multi_method_blocks_attributed(recwarn):
    """A two-method program run as other, forward, other: each block gets its own method's maps."""
    import os

    here = os.path.join(os.path.dirname(__file__), "data")
    insp = etlens.Inspector(etdump_path=os.path.join(here, "mm.etdp"), etrecord=os.path.join(here, "mm.etrecord"))
    blocks = [b for b in insp.event_blocks if b.name == "Execute"]
    assert [b.method for b in blocks] == ["other", "forward"]
    ops_other = {op for e in blocks[0].events for op in e.op_types}
    assert {"aten.sin.default", "aten.cos.default"} <= ops_other and "aten.addmm.default" not in ops_other
    assert "aten.addmm.default" in {op for e in blocks[1].events for op in e.op_types}
    assert not [w for w in recwarn if "does not match" in str(w.message)]
    # forcing one method for every block misattributes the other method's block: etlens says so
    with pytest.warns(UserWarning, match="does not match"):
        etlens.Inspector(etdump_path=os.path.join(here, "mm.etdp"), etrecord=os.path.join(here, "mm.etrecord"),
                         method="forward")

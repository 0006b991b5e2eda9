"""Attribution on real XNNPACK programs: exact on a one-op-per-delegate program, >= 90% elsewhere;
framework tax, per-node DataFrame, find_total_for_module, Perfetto names and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from etlens.analysis.attribution import UNATTRIBUTED, attribute
from tests.analysis.attribution.build_cases import ONE_PER_DELEGATE_OPS
from tests.conftest import requires_executorch

pytestmark = requires_executorch


def inspector(case, pte=True):
    import etlens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return etlens.Inspector(etdump_path=case.etdump, etrecord=case.etrecord, pte=case.pte if pte else None)


def test_one_op_per_delegate_is_attributed_exactly(one_per_delegate):
    from etlens.readers.pte import read

    insp = inspector(one_per_delegate)
    att = insp.attribution()
    plan = read(one_per_delegate.pte).program.execution_plan[0]
    assert len(plan.delegates) == len(ONE_PER_DELEGATE_OPS)
    seen = set()
    for ev in att.events:
        # every event of delegate k ran delegate k's only operator
        assert ev.op == ONE_PER_DELEGATE_OPS[ev.delegate_index], (ev.match, ev.delegate_index)
        assert ev.match.attributed and ev.match.quality in ("exact", "alias", "inserted")
        seen.add(ev.delegate_index)
    assert seen == set(range(len(ONE_PER_DELEGATE_OPS)))
    by_op = {ev.op: ev for ev in att.events}
    assert by_op["aten.linear.default"].module_path == "fc"
    assert by_op["aten.convolution.default"].module_path == "conv"
    assert by_op["aten.mul.Tensor"].match.event.startswith("Square")      # XNNPACK's rewrite of x * x
    s = att.summary()
    assert s["attributed_fraction"] == pytest.approx(1.0)
    assert s["unattributed_ms"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("case", ["cnn_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack"])
def test_fixtures_attributed_to_modules(artifacts, case):
    a = artifacts[case]
    att = inspector(a).attribution()
    s = att.summary()
    assert s["delegate_internal_ms"] > 0
    assert s["attributed_fraction"] >= 0.9, s
    # the remainder is explicit: attributed + unattributed = all delegate-internal event time
    assert s["attributed_ms"] + s["unattributed_ms"] == pytest.approx(s["delegate_internal_ms"], rel=1e-6)
    # framework tax and delegate overhead are per-run, non-negative, and inside Method::execute
    assert len(att.framework_per_run) == s["runs"] == len(att.execute_per_run) > 0
    for ex, fw, dl in zip(att.execute_per_run, att.framework_per_run, att.delegate_per_run, strict=True):
        assert 0 <= fw <= ex and 0 <= dl <= ex * 1.001
    assert 0 <= s["delegate_overhead_ms"] <= s["delegate_ms"]
    # every delegate-internal row names an ATen node, its module and a source line
    rows = [r for r in att.rows if r.inside_delegate and r.node != UNATTRIBUTED]
    assert rows and all(r.op and r.source_line and r.in_module for r in rows)


def test_cnn_layers_land_in_their_modules(artifacts):
    att = inspector(artifacts["cnn_q8_xnnpack"]).attribution()
    mods = {ev.module_path for ev in att.events if ev.op == "aten.convolution.default"}
    assert {"stem.0", "blocks.0.depthwise", "blocks.0.pointwise", "blocks.2.pointwise"} <= mods
    # Clamp (ReLU6) fused into its convolution: its handle joins the convolution's event, not an event of its own
    conv = [ev for ev in att.events if ev.module_path == "blocks.0.pointwise"]
    assert len(conv) == 1 and len(conv[0].match.handles) == 2 and conv[0].match.fused


def test_without_pte_the_remainder_is_unattributed(artifacts):
    att = inspector(artifacts["cnn_xnnpack"], pte=False).attribution()
    s = att.summary()
    assert s["attributed_ms"] == 0 and s["unattributed_ms"] == pytest.approx(s["delegate_internal_ms"])
    assert any(r.node == UNATTRIBUTED for r in att.rows)
    assert all(".pte" in ev.match.note for ev in att.events)


def test_node_dataframe_and_module_totals(artifacts):
    insp = inspector(artifacts["cnn_xnnpack"])
    df = insp.node_dataframe()
    for col in ("node", "debug_handles", "module_path", "source_line", "inside_delegate", "backend_ops",
                "p10 (ms)", "p50 (ms)", "p90 (ms)", "avg (ms)"):
        assert col in df.columns
    inside = df[df["inside_delegate"]]
    assert len(inside) >= 8 and inside["avg (ms)"].nunique() > 3    # nodes of one delegate: their own times
    # ExecuTorch's rule (default) vs counting time inside delegates per node
    et = insp.find_total_for_module("blocks")
    ours = insp.find_total_for_module("blocks", include_delegate_internals=True)
    blocks = inside[inside["module_path"].str.startswith("blocks")]["avg (ms)"].sum()
    assert ours == pytest.approx(blocks) and ours > 0
    assert et >= ours      # the whole DELEGATE_CALL carries every module of the delegate
    total = insp.find_total_for_module("", include_delegate_internals=True)
    assert ours < total


def test_perfetto_slices_named_by_node(artifacts, tmp_path):
    insp = inspector(artifacts["cnn_xnnpack"])
    path = tmp_path / "t.json"
    insp.write_perfetto_trace(str(path))
    ev = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "delegate"]
    assert ev and all("backend_event" in e["args"] for e in ev)
    names = {e["name"] for e in ev}
    assert "aten_convolution_default_2 · blocks.0.pointwise" in names
    assert any(e["args"]["backend_event"].startswith("Fully Connected") and e["args"]["module"] == "blocks.0.pointwise"
               for e in ev)
    # ExecuTorch's naming stays available
    insp.write_perfetto_trace(str(path), by_node=False)
    assert any(e["name"].startswith("Convolution (NHWC") for e in json.loads(path.read_text())["traceEvents"])


def test_cli_by_node_json(artifacts, tmp_path):
    a = artifacts["mixed_xnnpack"]
    out = tmp_path / "n.json"
    proc = subprocess.run([sys.executable, "-m", "etlens", "inspect", "--etdump", a.etdump, "--etrecord", a.etrecord,
                           "--pte", a.pte, "--by-node", "--format", "json", "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    for key in ("rows", "delegate_ms", "attributed_ms", "framework_ms"):
        assert key in doc
    for key in ("node", "debug_handles", "module_path", "avg_ms", "inside_delegate", "backend_ops"):
        assert key in doc["rows"][0]
    heads = {r["module_path"]: r for r in doc["rows"] if r["inside_delegate"]}
    assert {"fc1", "fc2", "head"} <= set(heads)
    assert heads["head"]["backend_ops"] == ["xnnpack.FullyConnected#2"]
    cumsum = [r for r in doc["rows"] if r["op"] == "aten.cumsum.default"]
    assert cumsum and not cumsum[0]["inside_delegate"]
    assert 0 <= doc["framework_ms"] < doc["execute_ms"]
    # the table form prints the framework tax line
    proc = subprocess.run([sys.executable, "-m", "etlens", "inspect", "--etdump", a.etdump, "--etrecord", a.etrecord,
                           "--pte", a.pte, "--by-node"], capture_output=True, text=True)
    assert proc.returncode == 0 and "framework tax" in proc.stdout and "fc1" in proc.stdout


def test_cli_by_node_needs_etrecord(artifacts):
    a = artifacts["mixed_xnnpack"]
    proc = subprocess.run([sys.executable, "-m", "etlens", "inspect", "--etdump", a.etdump, "--by-node"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "--etrecord" in proc.stderr and "Traceback" not in proc.stderr


def test_attribute_function_matches_inspector(artifacts):
    insp = inspector(artifacts["cnn_q8_xnnpack"], pte=False)
    att = attribute(insp, artifacts["cnn_q8_xnnpack"].pte)
    assert np.isclose(att.summary()["attributed_fraction"], 1.0, atol=0.1)


def test_wrong_pte_is_said_not_guessed(artifacts):
    import etlens

    a, other = artifacts["mixed_xnnpack"], artifacts["cnn_xnnpack"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        insp = etlens.Inspector(etdump_path=a.etdump, etrecord=a.etrecord, pte=other.pte)
    att = insp.attribution()
    assert att.summary()["attributed_ms"] == 0
    assert all(not ev.match.attributed and "program" in ev.match.note for ev in att.events)

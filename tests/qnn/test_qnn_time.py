"""Time inside QNN on real programs: per-op cycle events mapped to graph nodes, units kept apart.

``etlens inspect --by-node`` on the corpus's profiled programs (fp16 and int8 CNN, a transformer block,
three QNN partitions around CPU fallbacks). Simulator cycles vary run to run: the tests check names,
mapping, units and sums, never cycle values.
"""

from __future__ import annotations

import re

import pytest

from etlens.backends.qnn.events import QnnAttributor, parse_event

from .conftest import run_json

#: one worker builds the corpus while the other goes on (``--dist loadgroup``), instead of waiting on its lock
pytestmark = pytest.mark.xdist_group("qnn")

PROFILED = ("cnn_fp16", "cnn_int8", "block_fp16", "fallback_fp16")
_PER_OP = re.compile(r"OpId_\d+ \(cycles\)$")


def _by_node(corpus, case, tmp_path):
    code, doc = run_json(["inspect", "--etdump", str(corpus / f"{case}.etdp"), "--etrecord",
                          str(corpus / f"{case}.etrecord"), "--pte", str(corpus / f"{case}.pte"), "--by-node"],
                         tmp_path / f"{case}.json")
    assert code == 0
    return doc


def _dump_events(corpus, case):
    """Every QNN event name of the dump with its per-run values (raw numbers, as QNN's profiler gave them)."""
    from etlens.readers.etdump import read_etdump

    dump = read_etdump(str(corpus / f"{case}.etdp"))
    out: dict[str, list[int]] = {}
    for run in dump.runs:
        for i in range(len(run)):
            sid = int(run.name_id[i]) if run.name_id[i] >= 0 else int(run.delegate_id_str[i])
            if run.kind[i] != 0 or sid < 0:
                continue
            name = dump.string(sid)
            if "(" in name and ")" in name and name.endswith(")"):
                out.setdefault(name, []).append(int(run.end_time[i]) - int(run.start_time[i]))
    return out


@pytest.mark.parametrize("case", PROFILED)
def test_every_per_op_event_in_exactly_one_row(qnn_corpus, tmp_path, case):
    doc = _by_node(qnn_corpus, case, tmp_path)
    events = _dump_events(qnn_corpus, case)
    per_op = [e for e in events if _PER_OP.search(e)]
    assert len(per_op) >= 8
    qnn_rows = [r for r in doc["rows"] if r["backend"] == "QnnBackend"]
    seen: dict[str, int] = {}
    for r in qnn_rows:
        for e in r["events"]:
            seen[e] = seen.get(e, 0) + 1
    # one event name per QNN op per delegate call: the same name may come from several partitions
    assert all(e in seen for e in per_op), [e for e in per_op if e not in seen]
    totals = [e for e in events if not _PER_OP.search(e)]
    assert totals and not any(e in seen for e in totals), "counters or totals inside a node row"
    attributed = [e for e in per_op if any(e in r["events"] and r["node"] != "<unattributed>" for r in qnn_rows)]
    assert len(attributed) / len(per_op) >= 0.95
    for r in qnn_rows:
        assert r["cycles_avg"] is not None and r["avg_ms"] is None  # cycles are never milliseconds


@pytest.mark.parametrize("case", PROFILED)
def test_node_cycles_sum_to_the_per_op_total(qnn_corpus, tmp_path, case):
    doc = _by_node(qnn_corpus, case, tmp_path)
    events = _dump_events(qnn_corpus, case)
    runs = 3  # forward calls of every profiled case (build_corpus.RUNS)
    per_op_total = sum(sum(v) for e, v in events.items() if _PER_OP.search(e)) / runs
    rows_total = sum(r["cycles_avg"] for r in doc["rows"] if r["cycles_avg"] is not None)
    assert rows_total == pytest.approx(per_op_total, rel=1e-9)
    assert doc["cycles_avg"] == pytest.approx(per_op_total, rel=1e-9)
    # QNN's own total of the graph is the sum of its per-op records
    acc = sum(sum(v) for e, v in events.items() if e == "Accelerator (execute) time (cycles)") / runs
    assert acc == pytest.approx(per_op_total, rel=1e-9)
    metrics = {m["event"]: m for m in doc["delegate_metrics"]}
    assert metrics["Accelerator (execute) time (us)"]["unit"] == "us"
    assert metrics["Number of HVX threads used (count)"]["unit"] == "count"


def test_rows_name_nodes_modules_and_lines(qnn_corpus, tmp_path):
    doc = _by_node(qnn_corpus, "cnn_fp16", tmp_path)
    rows = {r["node"]: r for r in doc["rows"]}
    assert rows["aten_convolution_default"]["module_path"] == "conv1"
    assert rows["aten_convolution_default_1"]["module_path"] == "conv2"
    assert rows["aten_linear_default"]["module_path"] == "fc"
    assert rows["aten_relu_default"]["source_line"].startswith("models.py:")
    conv = rows["aten_convolution_default"]
    # the input's layout permute is inserted by QNN and charged to the convolution it feeds
    assert any(e.startswith("aten_permute_copy_default:") for e in conv["events"])
    assert conv["match"] == "inserted"
    assert rows["aten_linear_default"]["estimated_avg_ms"] > 0  # from the delegate's own clock, labelled


def test_cpu_fallbacks_keep_their_kernel_time(qnn_corpus, tmp_path):
    doc = _by_node(qnn_corpus, "fallback_fp16", tmp_path)
    cpu = {r["node"]: r for r in doc["rows"] if not r["inside_delegate"]}
    assert {"aten_erf_default", "aten_fmod_scalar"} <= set(cpu)
    assert all(r["avg_ms"] > 0 and r["cycles_avg"] is None for r in cpu.values())


def test_event_names_parse():
    assert parse_event("aten_relu_default:OpId_26 (cycles)") == {"kind": "op", "node": "aten_relu_default",
                                                                 "op_id": 26, "unit": "cycles"}
    assert parse_event("Input OpId_2 (cycles)")["kind"] == "io"
    assert parse_event("OpId_18 (cycles)")["kind"] == "bare"
    assert parse_event("Number of HVX threads used (count)") == {"kind": "total", "node": "", "op_id": None,
                                                                 "unit": "count"}
    m = QnnAttributor().match(["Input OpId_2 (cycles)", "aten_permute_copy_default_3:OpId_5 (cycles)",
                               "aten_convolution_default:OpId_9 (cycles)", "OpId_11 (cycles)",
                               "aten_relu_default:OpId_12 (cycles)", "Output OpId_3 (cycles)",
                               "QNN (execute) time (us)"], None,
                              graph_nodes=("aten_convolution_default", "aten_relu_default"))
    assert [x.nodes for x in m] == [("aten_convolution_default",)] * 3 + [("aten_relu_default",)] * 3 + [()]
    assert [x.quality for x in m][:3] == ["inserted", "inserted", "exact"]
    assert m[-1].total and m[-1].unit == "us"

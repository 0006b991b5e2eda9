"""QNN per-op events in the fleet dataset: each per-op cycle event carries the node and module it maps to."""

from __future__ import annotations

import pytest

from etlens.cli.main import main

from .conftest import run_json

#: one worker builds the corpus while the other goes on (``--dist loadgroup``), instead of waiting on its lock
pytestmark = pytest.mark.xdist_group("qnn")


def test_collect_maps_qnn_per_op_events_to_nodes(qnn_corpus, tmp_path):
    case = "cnn_fp16"
    assert main(["collect", str(qnn_corpus / f"{case}.etdp"), "--etrecord", str(qnn_corpus / f"{case}.etrecord"),
                 "-o", str(tmp_path / "fleet")]) == 0
    code, doc = run_json(["query", str(tmp_path / "fleet"),
                          "select event_name, node, module_path from events where inside_delegate"],
                         tmp_path / "q.json")
    assert code == 0
    rows = doc["rows"] if isinstance(doc, dict) else doc
    per_op = [r for r in rows if "OpId_" in r["event_name"]]
    assert per_op and all(r["node"] for r in per_op)
    assert {r["module_path"] for r in per_op if r["node"] == "aten_linear_default"} == {"fc"}
    assert not any(r["node"] for r in rows if "OpId_" not in r["event_name"])  # totals and counters: no node

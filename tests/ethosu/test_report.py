"""`etlens report --backend ethos-u55-128` and `etlens gap --inside-delegates` end to end (real compiles).

The gap on the TOSA graph (one compile) is the fast case; the whole report (trace, compile, page) the heavy tier's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import HAS_EXECUTORCH

pytestmark = [pytest.mark.skipif(not HAS_EXECUTORCH, reason="needs the executorch extra")]
MODELS = os.path.join(os.path.dirname(__file__), "models.py")


def _etlens(*args: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "etlens", *args], capture_output=True, text=True, timeout=1500,
                          cwd=cwd)


@pytest.mark.slow
def test_report_writes_page_and_artifacts(tmp_path):
    p = _etlens("report", "--model", f"{MODELS}:build", "--backend", "ethos-u55-128", "-o", "out/cnn.html",
                cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    out = tmp_path / "out"
    arts = sorted(os.listdir(out / "cnn_artifacts"))
    assert any(a.endswith(".pte") for a in arts) and any(a.endswith(".etrecord") for a in arts)
    assert any(a.endswith(".vela.json") for a in arts) and any(a.endswith(".tosa") for a in arts)
    # the report's traced lowering has the Arm backend's passes from inside its preprocess
    from etlens.model.trace import Trace

    trace = Trace.load(out / "cnn_artifacts" / next(a for a in arts if a.endswith("trace.json")))
    assert [s.stage for s in trace.snapshots].count("partition") == 1 and trace.snapshots[-1].stage == "lower"
    assert {"FoldAndAnnotateQParamsPass", "RewriteConvPass", "ExirToTosaPass"} <= set(trace.pass_names())
    page = (out / "cnn.html").read_text()
    for text in ("NPU cycles (Vela)", "On the CPU", "TOSA ARGMAX", "Layout changes on the NPU",
                 "Inside the NPU (TOSA reference model)", "Vela&#x27;s per-layer table", "not run"):
        assert text in page, text
    etrecord = str(out / "cnn_artifacts" / next(a for a in arts if a.endswith(".etrecord")))
    doc = json.loads(_etlens("delegation", etrecord, "--format", "json", cwd=str(tmp_path)).stdout)
    assert doc["ethos_u"]["npu_cycles"] == sum(n.get("npu_cycles") or 0 for n in doc["nodes"])


def test_gap_inside_delegates_runs_the_tosa_graph(tmp_path):
    p = _etlens("gap", "--model", f"{MODELS}:build", "--backend", "ethos-u55-128", "--inside-delegates",
                "--format", "json", cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["engine"] == "TOSA reference model" and doc["first_flagged"] is None
    nodes = {r["node"]: r for r in doc["rows"]}
    assert nodes["aten_convolution_default"]["max_abs_lsb"] == 0 and nodes["aten_convolution_default"]["float_SNR"] > 25

"""``etlens report --model … --backend qnn-htp``: build, run on the HTP simulator, report; a clear error without QNN."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from etlens.backends import for_build
from etlens.errors import BackendUnavailableError

from .conftest import HERE

#: one worker builds the corpus while the other goes on (``--dist loadgroup``), instead of waiting on its lock
pytestmark = pytest.mark.xdist_group("qnn")


def test_without_qnn_libraries_the_error_names_qnn_sdk_root(monkeypatch):
    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)
    from etlens.backends.qnn.build import sdk_problem

    assert sdk_problem() == "QNN_SDK_ROOT is not set"
    assert "LD_LIBRARY_PATH" in sdk_problem({"QNN_SDK_ROOT": str(HERE)}) or "has no" in sdk_problem(
        {"QNN_SDK_ROOT": str(HERE)})
    backend = for_build("qnn-htp-sm8750")
    assert backend is not None and backend.name == "qnn"
    from etlens.backends import hook

    cfg = hook(backend, "build")("qnn-htp-sm8750")
    assert cfg.soc == "SM8750"
    try:
        cfg.check_available()
    except BackendUnavailableError as exc:
        assert "QNN_SDK_ROOT" in str(exc)
    else:  # pragma: no cover - only without ExecuTorch would the import check come first
        pytest.fail("check_available passed without QNN_SDK_ROOT")


@pytest.mark.slow
@pytest.mark.parametrize("quantize", [False, True])
def test_report_builds_and_runs_on_the_simulator(qnn_corpus, tmp_path, quantize):
    from tests.qnn.sdk import env

    out = tmp_path / "r.html"
    cmd = [sys.executable, "-m", "etlens", "report", "--model", f"{HERE / 'models.py'}:build_cnn",
           "--backend", "qnn-htp", "-o", str(out)] + (["--quantize"] if quantize else [])
    proc = subprocess.run(cmd, env=env(qnn_corpus / "sdk"), capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    arts = Path(str(out)[:-5] + "_artifacts")
    pte = next(arts.glob("*.pte"))
    info = subprocess.run([sys.executable, "-m", "etlens", "info", str(pte), "--format", "json"],
                          capture_output=True, text=True, env={**os.environ})
    q = json.loads(info.stdout)["methods"][0]["delegates"][0]["qnn"]
    assert (q["soc_model"], q["htp_arch"], q["precision"]) == ("SM8650", "V75", "int8" if quantize else "fp16")
    assert next(arts.glob("*.etdp")).stat().st_size > 0

"""``etlens gap --model … --inside-delegates``: flags, errors, JSON and the exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from etlens.cli.main import main
from etlens.cli.options import EXIT_GATE
from tests.conftest import requires_executorch

FAULTS = Path(__file__).resolve().parent / "faults.py"


def test_needs_a_model(capsys):
    assert main(["gap", "--inside-delegates"]) == 1
    assert "--model" in capsys.readouterr().err


def test_artifact_mode_still_needs_its_files(capsys):
    assert main(["gap", "--etdump", "x.etdp"]) == 1
    assert "--etrecord" in capsys.readouterr().err


def test_artifacts_and_model_do_not_mix(capsys):
    assert main(["gap", "--demo", "mlp", "--etdump", "x.etdp"]) == 1
    assert "--etdump" in capsys.readouterr().err


def test_bisect_needs_threshold(capsys):
    assert main(["gap", "--model", f"{FAULTS}:mlp_model", "--bisect"]) == 1
    assert "--fail-on-gap" in capsys.readouterr().err


@requires_executorch
@pytest.mark.slow
def test_fault_found_json_and_gate_exit(tmp_path):
    out = tmp_path / "in.json"
    status = main(["gap", "--model", f"{FAULTS}:mlp_model", "--quantize", "--inside-delegates", "--metric", "SNR",
                   "--threshold", "10", "--format", "json", "-o", str(out)])
    assert status == EXIT_GATE
    doc = json.loads(out.read_text())
    assert doc["first_divergence"]["module_path"] == "blocks.4.fc"
    assert doc["observer_effect"]["identical"] is True
    assert doc["method"]["cycles"] == 2

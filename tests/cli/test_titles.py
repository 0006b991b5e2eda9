"""Report titles name the model (its class, demo name or file stem; an artifact's stem), or --title."""

from __future__ import annotations

import re
import shutil

import pytest

from etlens.cli.main import main
from etlens.builder.loader import model_title


def test_model_title_prefers_class_then_file_stem():
    torch = pytest.importorskip("torch")

    class TinyNet(torch.nn.Module):
        def forward(self, x):
            return x

    assert model_title(TinyNet(), "models.py:build") == "TinyNet"
    assert model_title(torch.nn.Sequential(torch.nn.ReLU()), "nets/my_net.py:build") == "my_net"
    assert model_title(torch.nn.Sequential(), "pkg.zoo:build") == "zoo"
    assert model_title(torch.nn.ReLU(), "cnn") == "cnn"  # a demo keeps its name


def _title(path) -> str:
    return re.search(r"<title>(.*?)</title>", path.read_text(encoding="utf-8")).group(1)


def test_artifact_report_is_titled_by_the_program(artifacts, tmp_path, capsys):
    case = artifacts["mlp_portable"]
    pte = tmp_path / "speech_kws.pte"
    shutil.copyfile(case.pte, pte)
    base = ["report", "--etdump", case.etdump, "--etrecord", case.etrecord, "--debug-buffer", case.debug_buffer]
    out = tmp_path / "r.html"
    assert main(base + ["--pte", str(pte), "-o", str(out), "--no-inside-delegates"]) == 0
    assert _title(out) == "etlens report: speech_kws"
    assert main(base + ["-o", str(out), "--title", "nightly <KWS> & co"]) == 0
    assert _title(out) == "nightly &lt;KWS&gt; &amp; co"

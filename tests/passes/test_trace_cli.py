"""``etlens trace`` and ``etlens demos`` through ``etlens.cli.main.main``."""

from __future__ import annotations

import json
import textwrap

import pytest

from etlens.cli.main import main


def test_demos_lists_every_demo(capsys):
    from etlens.demos import DEMOS

    assert main(["demos"]) == 0
    out = capsys.readouterr().out
    for name, (_, desc) in DEMOS.items():
        assert name in out and desc in out
    assert main(["demos", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == set(DEMOS)


def test_trace_demo_aten_writes_json_and_html(tmp_path, capsys):
    out, html = tmp_path / "t.json", tmp_path / "t.html"
    assert main(["trace", "--model", "mlp", "--backend", "aten", "-o", str(out), "--html", str(html)]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out}: 2 snapshots" in text
    data = json.loads(out.read_text())
    assert data["schema"] == "etlens.trace" and data["model"] == "mlp" and data["backend"] == "aten"
    page = html.read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "run_decompositions" in page


def test_trace_model_from_file(tmp_path, capsys):
    src = tmp_path / "my_models.py"
    src.write_text(textwrap.dedent("""
        import torch

        class Tiny(torch.nn.Module):
            def forward(self, x):
                return torch.nn.functional.gelu(x) * 2

        def build():
            return Tiny(), (torch.randn(3, 4),)

        tiny = Tiny()
    """))
    out = tmp_path / "f.json"
    assert main(["trace", "--model", f"{src}:build", "--backend", "aten", "-o", str(out), "--no-times"]) == 0
    data = json.loads(out.read_text())
    assert data["model"] == "build"
    assert all(s["wall_time_s"] == 0.0 for s in data["snapshots"])
    # a bare module needs input shapes
    assert main(["trace", "--model", f"{src}:tiny", "--backend", "aten", "-o", str(out)]) == 1
    assert "--input-shape" in capsys.readouterr().err
    assert main(["trace", "--model", f"{src}:tiny", "--backend", "aten", "-o", str(out),
                 "--input-shape", "2,5"]) == 0


def test_trace_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:   # a backend name is checked when the command line is parsed
        main(["trace", "--model", "mlp", "--backend", "nope", "-o", str(tmp_path / "x.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --backend: unknown backend 'nope'; registered: aten, xnnpack" in err and "Traceback" not in err
    assert main(["trace", "--model", "no_such_demo", "--backend", "aten"]) == 1
    assert "not a demo" in capsys.readouterr().err
    assert main(["trace", "--backend", "aten"]) == 1
    assert "give --model" in capsys.readouterr().err


def test_failed_stage_still_writes_file_and_exits_1(tmp_path, capsys):
    src = tmp_path / "bad_model.py"
    src.write_text(textwrap.dedent("""
        import torch

        class DataDependent(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:          # torch.export cannot trace data-dependent control flow
                    return x + 1
                return x - 1

        def build():
            return DataDependent(), (torch.randn(4),)
    """))
    out = tmp_path / "bad.json"
    assert main(["trace", "--model", f"{src}:build", "--backend", "aten", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "stage 'export' failed after []" in err and str(out) in err
    data = json.loads(out.read_text())
    assert data["snapshots"][-1]["error"]["traceback"].startswith("Traceback")


def test_list_backends(capsys):
    assert main(["trace", "--list-backends"]) == 0
    out = capsys.readouterr().out
    for name in ("aten", "xnnpack", "cortex_m", "vulkan", "qnn", "cadence"):
        assert name in out

"""``etlens report --model`` on real models: never abort, the user's errors are the user's, quiet output.

The ExecuTorch runtime and lowering run in child processes (etlens.builder.runner): a native abort
(here forced with a tiny ``--debug-buffer-size``) must come back as one ``etlens: error:`` line
naming the flag while this process survives; the debug buffer sized from the program must let
real architectures (BERT, ResNet from the corpus) run with intermediate outputs logged.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from etlens.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
NOISE = ("Failed to load", "FutureWarning", "cpuinfo", "_pytree.py", "Warning:", "W11", "Traceback")


def test_debug_and_verbose_parse_after_the_subcommand():
    parser = build_parser()
    args = parser.parse_args(["report", "--demo", "--debug"])
    assert args.debug is True and args.debug_buffer is None
    assert parser.parse_args(["report", "--demo", "-v"]).verbose is True
    assert parser.parse_args(["--debug", "report", "--demo"]).debug is True  # the global flag still works
    with pytest.raises(SystemExit):  # abbreviations are refused, so --debug can never mean --debug-buffer
        parser.parse_args(["report", "--demo", "--debug-buf", "x"])


def test_the_cause_is_the_childs_last_native_line():
    from etlens.builder.worker import last_native_line as _last_native_line

    log = ("Failed to load /x/torchao/_C.so: nope\n[cpuinfo_utils.cpp:125] CPU info mismatch\n"
           "[buffer_data_sink.cpp:47] Ran out of space to store intermediate outputs.\n"
           "[etdump_flatcc.cpp:650] In function log_evalue(), assert failed (offset.ok()): write failed\n")
    assert _last_native_line(log) == ("Ran out of space to store intermediate outputs. (In function log_evalue(), "
                                      "assert failed (offset.ok()): write failed)")
    assert _last_native_line("E 00:00:01.000123 executorch:method.cpp:1200] Kernel failed\n") == "Kernel failed"
    assert _last_native_line("plain python error\n") == "plain python error"
    assert _last_native_line("") is None


def test_user_model_error_names_stage_and_user_frame(tmp_path, capsys):
    pytest.importorskip("executorch.exir")
    src = tmp_path / "mymodel.py"
    src.write_text(textwrap.dedent("""\
        import torch

        class Net(torch.nn.Module):
            def forward(self, x):
                raise ValueError("shape mismatch in my block")

        def build():
            return Net(), (torch.randn(2, 3),)
        """))
    assert main(["report", "--model", f"{src}:build", "--no-trace", "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    # the model is named by its class (the report's title), the stage and the user's error follow
    assert "export of Net() failed at export: ValueError: shape mismatch in my block" in err, err
    assert f"{src}:5 in forward" in err, err
    assert "internal error" not in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_user_build_error_names_build_stage(tmp_path, capsys):
    src = tmp_path / "broken.py"
    src.write_text("def build():\n    return 1 / 0\n")
    assert main(["report", "--model", f"{src}:build", "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "export of build() failed at build: ZeroDivisionError" in err and f"{src}:2 in build" in err, err


@pytest.mark.executorch
def test_native_abort_becomes_an_error_naming_the_flag(tmp_path, capsys):
    pytest.importorskip("executorch.exir")
    code = main(["report", "--demo", "mlp", "--no-trace", "--runs", "1", "--debug-buffer-size", "64",
                 "-o", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 1  # this process survived the runtime's abort in the child
    assert err.startswith("etlens: error: run on the ExecuTorch runtime crashed"), err
    assert "Ran out of space to store intermediate outputs" in err and "--debug-buffer-size" in err, err
    assert "--runs" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


@pytest.mark.executorch
def test_portable_quantized_loads_the_quantized_kernels(tmp_path, capsys):
    pytest.importorskip("executorch.exir")
    out = tmp_path / "q.html"
    assert main(["report", "--demo", "mlp", "--quantize", "--backend", "portable", "--no-trace", "--runs", "1",
                 "-o", str(out)]) == 0, capsys.readouterr().err
    from etlens.builder.runner import has_quantized_ops

    assert has_quantized_ops(str(tmp_path / "q_artifacts" / "mlp.pte"))
    assert "id='latency'" in out.read_text()
    assert "wrote " in capsys.readouterr().out


@pytest.mark.executorch
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["bert", "resnet"])
def test_corpus_model_runs_with_a_buffer_sized_from_the_program(arch, tmp_path):
    """Intermediate outputs of every run fit the buffer sized from the .pte (no fixed 1 MiB guess)."""
    pytest.importorskip("transformers")
    from etlens.builder.runner import debug_buffer_bytes
    from etlens.readers.etdump import read as read_etdump
    from etlens.report import report_from_model
    from tests.corpus.models import build

    model, inputs = build(arch)
    out = tmp_path / f"{arch}.html"
    result = report_from_model(model, inputs, str(out), name=arch, runs=2, trace=False, progress=False,
                               inside_delegates=False)
    assert out.exists() and result.total_latency_ms and result.total_latency_ms > 0
    arts = tmp_path / f"{arch}_artifacts"
    pte = arts / f"{arch}.pte"
    dump = read_etdump(str(arts / f"{arch}.etdp")).dump
    assert sum(1 for r in dump.runs if len(r.debug_indices())) == 2  # every run logged (+ a load block)
    used = os.path.getsize(arts / f"{arch}.debug.bin")  # trimmed to the bytes the ETDump points into
    assert 0 < used <= debug_buffer_bytes(str(pte), 2)
    assert result.worst_gap is not None  # intermediate outputs were logged and compared


@pytest.mark.executorch
@pytest.mark.slow
def test_demo_report_piped_is_quiet(tmp_path):
    """``bash scripts/demo.sh``'s command, piped: one line on stdout, nothing on stderr."""
    pytest.importorskip("executorch.exir")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    out = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "etlens", "report", "--demo", "-o", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == "", proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"wrote {out}"), proc.stdout
    assert "total latency" in lines[0] and "delegated" in lines[0] and "worst MSE gap" in lines[0]
    for noise in NOISE:
        assert noise not in proc.stdout + proc.stderr, noise
    assert out.exists()


def test_export_of_a_model_returning_its_kv_cache_says_what_to_do():
    from etlens.errors import EtlensError
    from etlens.builder.loader import user_code

    msg = ("Found <class 'transformers.cache_utils.DynamicCache'> in output, which is not a known type. "
           "If this type holds tensors, you need to register a pytree for it.")
    try:
        with user_code("export", "build"):
            raise RuntimeError(msg)
    except EtlensError as exc:
        text = str(exc)
    assert text.startswith("export of build() failed at export: RuntimeError: Found <class 'transformers.cache_utils")
    assert "config.use_cache=False" in text

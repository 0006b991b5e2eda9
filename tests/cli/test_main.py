"""The CLI shell: help, errors as one line with exit 1, never a traceback."""

from __future__ import annotations

import subprocess
import sys

from etlens.cli.main import COMMANDS, main


def test_help_lists_subcommands(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for name in ("info", "report"):
        assert name in out


def test_each_subcommand_has_help_with_example(capsys):
    import importlib

    for mod in COMMANDS:
        try:
            importlib.import_module(f"etlens.cli.{mod}")
        except ImportError:
            continue
        name = mod.replace("_", "-")
        try:
            main([name, "--help"])
        except SystemExit as exc:
            assert exc.code == 0
        out = capsys.readouterr().out
        assert "example:" in out and f"etlens {name}" in out, name


def test_error_is_one_line_exit_1(tmp_path, capsys):
    bad = tmp_path / "junk.pte"
    bad.write_bytes(b"\x00" * 3)
    code = main(["info", str(bad)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("etlens: error:") and "junk.pte" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_help_is_fast_and_light():
    code = ("import sys, etlens.cli.main as m\n"
            "m.build_parser()\n"
            "heavy = [k for k in ('torch', 'pandas', 'executorch') if k in sys.modules]\n"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "", f"etlens --help imports heavy modules: {out}"


def test_a_subcommand_that_fails_to_import_is_loud(monkeypatch, capsys):
    """A broken subcommand module is listed as unavailable and fails with exit 1 naming the import error."""
    from etlens.cli import main as cli_main

    monkeypatch.setattr(cli_main, "COMMANDS", [*COMMANDS, "no_such_command"])
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "no-such-command" in out and "unavailable" in out and "ModuleNotFoundError" in out
    assert main(["no-such-command", "--help", "x"]) == 1
    err = capsys.readouterr().err
    assert "etlens.cli.no_such_command failed to import" in err and "ModuleNotFoundError" in err
    assert "info" in out  # the others still work

"""The one command-line grammar: the same --format values everywhere, old spellings kept, exit codes apart."""

from __future__ import annotations

import argparse
import csv
import io
import json

import pytest

from etlens.cli.main import build_parser, main
from etlens.cli.options import EXIT_CODES, EXIT_GATE, EXIT_OK, EXIT_USAGE, FORMATS, flatten, render_rows

#: subcommands that write a document or files rather than print rows (their -o is the written file)
WRITES_FILES = {"report", "view", "trace", "model-explorer", "collect", "mcp"}  # mcp: a server, no data output


def _subparsers() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(action.choices)


def test_every_data_command_takes_the_same_formats():
    subs = _subparsers()
    data_cmds = sorted(set(subs) - WRITES_FILES)
    assert {"info", "inspect", "gap", "delegation", "query", "compare", "memory", "size", "diff", "verify",
            "demos"} <= set(data_cmds)
    for name in data_cmds:
        opts = {o: a for a in subs[name]._actions for o in a.option_strings}
        assert "--format" in opts, name
        assert tuple(opts["--format"].choices) == FORMATS, name
        assert "--json" in opts and "-o" in opts, name
        # the old spellings still work, mapped onto the new values
        ns = argparse.Namespace(format="table")
        opts["--json"](subs[name], ns, [], "--json")
        assert ns.format == "json", name
        assert opts["--format"].type("text") == "table", name


def test_gates_are_spelled_fail_on():
    subs = _subparsers()
    for name, p in subs.items():
        for a in p._actions:
            for o in a.option_strings:
                if "threshold" in o:  # the one old spelling, kept as an alias of --fail-on-gap
                    assert "--fail-on-gap" in a.option_strings, (name, o)


def test_help_lists_exit_codes(capsys):
    assert main([]) == EXIT_OK
    out = capsys.readouterr().out
    assert "exit status:" in out
    for code in EXIT_CODES:
        assert f"\n  {code} " in out
    assert len({EXIT_OK, EXIT_USAGE, EXIT_GATE, 1}) == 4


def test_usage_error_is_2_and_gate_is_3(tmp_path, committed, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["info", str(committed["mlp_xnnpack"].pte), "--format", "yaml"])
    assert exc.value.code == EXIT_USAGE
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", FORMATS)
def test_info_formats(committed, capsys, fmt):
    assert main(["info", str(committed["mlp_xnnpack"].pte), "--format", fmt]) == EXIT_OK
    out = capsys.readouterr().out
    if fmt == "json":
        assert json.loads(out)["format"] == "pte"
    elif fmt in ("csv", "tsv"):
        rows = list(csv.reader(io.StringIO(out), delimiter="\t" if fmt == "tsv" else ","))
        assert rows[0] == ["field", "value"]
        assert dict(rows[1:])["format"] == "pte"
    else:
        assert "ExecuTorch program (.pte)" in out


def test_json_alias_equals_format_json(committed, capsys):
    pte = str(committed["mlp_xnnpack"].pte)
    main(["info", pte, "--json"])
    old = capsys.readouterr().out
    main(["info", pte, "--format", "json"])
    assert capsys.readouterr().out == old


def test_render_rows_round_trips():
    cols, rows = ["a", "b"], [[1, ["x", "y"]], [2.5, None]]
    assert json.loads(render_rows(cols, rows, "json")) == [{"a": 1, "b": ["x", "y"]}, {"a": 2.5, "b": None}]
    assert list(csv.reader(io.StringIO(render_rows(cols, rows, "csv")))) == [["a", "b"], ["1", "x, y"], ["2.5", ""]]
    assert render_rows(cols, rows, "tsv").splitlines()[0] == "a\tb"
    assert "x, y" in render_rows(cols, rows, "table", footer="(2 rows)")


def test_flatten():
    assert flatten({"a": {"b": 1}, "c": [2, {"d": 3}], "e": [1, 2]}) == [
        ("a.b", 1), ("c[0]", 2), ("c[1].d", 3), ("e", [1, 2])]

"""The one output path: every data command goes through etlens.cli.emit (one JSON style, one NaN policy).

Unit tests pin the policy on each shape a result can have (a JSON document, a list of row objects, a
DataFrame, ``(columns, rows)``); the CLI tests run one real command of each shape on the committed
artifacts in all four formats and check that JSON is strict (no NaN/Infinity tokens), CSV/TSV have the
same header, and ``-o FILE`` writes what stdout shows.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from etlens.cli.emit import JSON_INDENT, emit, render, to_jsonable
from etlens.cli.main import build_parser, main
from etlens.cli.options import DEFAULT_DEMO, FORMATS

CLI = Path(__file__).resolve().parents[2] / "src" / "etlens" / "cli"
NAN, INF = float("nan"), float("inf")


def _strict(text: str):
    """json.loads that rejects NaN / Infinity (what other languages' parsers do)."""
    def bad(token):
        raise AssertionError(f"non-standard JSON constant {token}")
    return json.loads(text, parse_constant=bad)


def _csv(text: str, fmt: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ","))


def test_only_the_emitter_writes_json_or_branches_on_format():
    hits = []
    for p in sorted(CLI.glob("*.py")):
        if p.name == "emit.py":
            continue
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"json\.dumps|args\.format", line):
                hits.append(f"{p.name}:{i}: {line.strip()}")
    assert not hits, "format logic outside cli/emit.py:\n" + "\n".join(hits)


def test_nan_policy_on_a_document():
    doc = {"a": NAN, "b": [1.0, INF, -INF], "c": {"d": None, 2: (1, 2)}}
    js = _strict(render("json", doc=doc))
    assert js == {"a": None, "b": [1.0, None, None], "c": {"d": None, "2": [1, 2]}}
    rows = _csv(render("csv", doc=doc), "csv")     # no rows given: the document flattened to field,value
    assert rows[0] == ["field", "value"]
    assert dict(rows[1:]) == {"a": "", "b": "1.0, , ", "c.d": "", "c.2": "1, 2"}
    assert render("table", doc=doc, text=lambda: "people") == "people"


def test_nan_policy_on_row_objects():
    recs = [{"x": 1, "y": NAN}, {"x": INF, "z": "s"}]
    assert _strict(render("json", rows=recs)) == [{"x": 1, "y": None, "z": None}, {"x": None, "y": None, "z": "s"}]
    assert _csv(render("csv", rows=recs), "csv") == [["x", "y", "z"], ["1", "", ""], ["", "", "s"]]
    assert _csv(render("tsv", rows=recs, columns=["z", "x"]), "tsv") == [["z", "x"], ["", "1"], ["s", ""]]
    table = render("table", rows=recs, footer="(2 rows)")
    assert table.splitlines()[0].split() == ["x", "y", "z"] and table.endswith("(2 rows)")


def test_nan_policy_on_a_dataframe():
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    df = pd.DataFrame({"op": ["a", "b"], "ms": [np.float32(1.5), np.nan], "n": np.array([1, 2], dtype=np.int64),
                       "r": [np.inf, 2.0]})
    assert _strict(render("json", rows=df)) == [{"op": "a", "ms": 1.5, "n": 1, "r": None},
                                                {"op": "b", "ms": None, "n": 2, "r": 2.0}]
    assert _csv(render("csv", rows=df), "csv") == [["op", "ms", "n", "r"], ["a", "1.5", "1", ""], ["b", "", "2", "2.0"]]
    assert df["r"].iloc[0] == np.inf  # the caller's frame is not changed


def test_nan_policy_on_columns_and_rows():
    text = render("json", rows=(["k", "v"], [("a", NAN), ("b", [1, INF])]))
    assert _strict(text) == [{"k": "a", "v": None}, {"k": "b", "v": [1, None]}]
    assert _csv(render("csv", rows=(["k", "v"], [("a", NAN), ("b", [1, INF])])), "csv") == [
        ["k", "v"], ["a", ""], ["b", "1, "]]


def test_one_json_style(tmp_path):
    text = render("json", doc={"a": [1, 2]})
    assert text == json.dumps({"a": [1, 2]}, indent=JSON_INDENT)
    out = tmp_path / "o.json"
    ns = argparse.Namespace(format="json", output=str(out))
    assert emit(ns, doc=lambda: {"lazy": True}) == out.read_text()
    assert json.loads(out.read_text()) == {"lazy": True}


def test_to_jsonable_numpy_and_objects():
    np = pytest.importorskip("numpy")
    assert to_jsonable({"a": np.float64("nan"), "b": np.arange(3), "c": np.bool_(True), "d": object}) == {
        "a": None, "b": [0, 1, 2], "c": True, "d": str(object)}
    assert math.isfinite(to_jsonable(np.float32(2.5)))


#: one real command per shape: (argv after the artifact paths, the CSV header's first cells)
def _commands(d):
    x = d["mlp_xnnpack"]
    return {
        "document (info)": (["info", str(x.pte)], ["field", "value"]),
        "row objects (memory)": (["memory", str(x.pte)], ["method", "value"]),
        "dataframe (inspect)": (["inspect", "--etdump", str(x.etdump), "--no-summary"], ["event_block_name"]),
        "rows (demos)": (["demos"], ["name", "description"]),
    }


@pytest.mark.parametrize("shape", ["document (info)", "row objects (memory)", "dataframe (inspect)", "rows (demos)"])
def test_each_shape_in_every_format(committed, capsys, tmp_path, shape):
    argv, header = _commands(committed)[shape]
    for fmt in FORMATS:
        assert main([*argv, "--format", fmt]) == 0
        out = capsys.readouterr().out
        if fmt == "json":
            _strict(out)
            assert out.startswith(("{\n  ", "[\n  ")), "two-space indent"
        elif fmt in ("csv", "tsv"):
            assert _csv(out, fmt)[0][:len(header)] == header
        else:
            assert out.strip()
        f = tmp_path / f"{shape[:3]}.{fmt}"
        assert main([*argv, "--format", fmt, "-o", str(f)]) == 0
        capsys.readouterr()
        assert f.read_text().rstrip("\n") == out.rstrip("\n"), f"-o differs from stdout ({fmt})"


def test_one_default_demo():
    parser = build_parser()
    assert parser.parse_args(["report", "--demo"]).demo == DEFAULT_DEMO
    assert parser.parse_args(["trace", "--demo"]).demo == DEFAULT_DEMO
    assert parser.parse_args(["gap", "--demo"]).demo == DEFAULT_DEMO


def test_backend_is_checked_at_parse_time_without_executorch():
    code = ("import sys\n"
            "from etlens.cli.main import build_parser\n"
            "p = build_parser()\n"
            "assert p.parse_args(['report', '--demo', '--backend', 'portable']).backend == 'portable'\n"
            "assert p.parse_args(['trace', '--backend', 'aten']).backend == 'aten'\n"
            "assert p.parse_args(['gap', '--demo', 'mlp']).backend == 'xnnpack'\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('executorch', 'torch')], 'heavy import'\n"
            "for cmd in ('report', 'trace', 'gap'):\n"
            "    try:\n"
            "        p.parse_args([cmd, '--demo', '--backend', 'nope'])\n"
            "    except SystemExit as e:\n"
            "        assert e.code == 2\n"
            "    else:\n"
            "        raise AssertionError(cmd)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("unknown backend 'nope'; registered: aten, xnnpack, portable") == 3

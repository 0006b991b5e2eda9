"""Fleet: collect real ETDumps of two builds, query them, and get the regression verdicts right."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from etlens.cli.main import main
from etlens.cli.options import EXIT_GATE
from etlens.fleet import Side, collect, compare, query
from etlens.fleet.stats import mannwhitney_p, verdict


def _wider_layer(module_path) -> bool:
    return (module_path or "").startswith("block")


#: The end-to-end tests run with the default thresholds. Widening ``block`` (30-200x slower ops) can also
#: cost its neighbours (its weights evict theirs from the cache): on a quiet machine that shift is within
#: their process-to-process spread and they stay ``same``; on a busy CI machine ``inp``/``out`` measured
#: 1.4-1.5x slower in all four processes of build n+1 (p < 0.002), and etlens rightly calls that a
#: regression (docs/fleet.md, "Verdicts": a collateral slowdown beyond the floor is reported as what it
#: is). So an op outside ``block`` may be flagged, but only as collateral: in the same direction as the
#: change, beyond its own floor, and far smaller than the change itself.
_COLLATERAL = 4.0  # a neighbour's shift must be at least this many times smaller than the smallest change


def _cmp(ds, a, b):
    return compare(Side.of_dataset(ds, f"build = '{a}'"), Side.of_dataset(ds, f"build = '{b}'"))


def _flagged(res, verdict):
    return [r for r in res["rows"] if r["verdict"] == verdict]


def test_wider_layer_flagged_and_nothing_else(dataset):
    res = _cmp(dataset, "n", "n+1")
    bad = {(r["event_name"], r["module_path"]) for r in _flagged(res, "regression")}
    wider_rows = [r for r in res["rows"] if _wider_layer(r["module_path"])]
    wider = {(r["event_name"], r["module_path"]) for r in wider_rows}
    assert wider and wider <= bad   # every op of block.0/1/2 (linear, relu, linear)
    smallest_change = min(r["ratio"] for r in wider_rows)
    for r in _flagged(res, "regression"):
        if not _wider_layer(r["module_path"]):   # collateral: beyond its floor, far below the change
            assert r["unit_ratio"] > r["floor"] and r["ratio"] * _COLLATERAL < smallest_change, r
    assert not _flagged(res, "improvement")
    flagged_modules = {r["module_path"] for r in res["modules"] if r["verdict"] == "regression"}
    assert {"block.0", "block.1", "block.2"} <= flagged_modules
    collateral_modules = {r["module_path"] for r in _flagged(res, "regression")}
    assert flagged_modules - {"block.0", "block.1", "block.2"} <= collateral_modules
    assert all(r["match"].startswith("debug handle, module path and name") for r in res["rows"])
    assert res["summary"]["model_latency"]["verdict"] == "regression"
    assert res["summary"]["improvements"] == 0


def test_swapped_sides_report_improvements(dataset):
    res = _cmp(dataset, "n+1", "n")
    better_rows = _flagged(res, "improvement")
    wider_rows = [r for r in res["rows"] if _wider_layer(r["module_path"])]
    assert wider_rows and all(r["verdict"] == "improvement" for r in wider_rows)
    largest_change = max(r["ratio"] for r in wider_rows)   # ratios < 1 here: the largest is the smallest gain
    for r in better_rows:
        if not _wider_layer(r["module_path"]):   # collateral: the neighbours' cache shift, undone
            assert r["unit_ratio"] < 1 / r["floor"] and r["ratio"] > _COLLATERAL * largest_change, r
    assert res["summary"]["regressions"] == 0


def test_cli_compare_json_and_gate(dataset, tmp_path, capsys):
    out = tmp_path / "c.json"
    html = tmp_path / "c.html"
    rc = main(["compare", dataset, "--where", "build='n'", "--where", "build='n+1'", "--json", "-o", str(out),
               "--html", str(html)])
    assert rc == EXIT_GATE
    doc = json.loads(out.read_text())
    row = doc["rows"][0]
    for key in ("node", "module_path", "event_name", "a_p50_ms", "b_p50_ms", "ratio", "verdict"):
        assert key in row
    assert row["verdict"] == "regression" and row["ratio"] > row["floor"] > 1
    assert doc["summary"]["unit"] == "file" and row["a_units"] == row["b_units"] == 4
    page = html.read_text()
    assert "<svg" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    swapped = ["compare", dataset, "--where", "build='n+1'", "--where", "build='n'"]
    assert main(swapped) == 0


def test_compare_etdumps_directly(fleet):
    a = [d for d in fleet["dumps"] if d["build"] == "n"][0]
    b = [d for d in fleet["dumps"] if d["build"] == "n+1"][0]
    res = compare(Side.of_etdumps([a["etdump"]], a["etrecord"]), Side.of_etdumps([b["etdump"]], b["etrecord"]))
    flagged = [r for r in res["rows"] if r["verdict"] == "regression"]
    in_block = [r for r in flagged if r["module_path"].startswith("block.")]
    assert {r["module_path"] for r in in_block} == {"block.0", "block.1", "block.2"}
    # block's operators do 32x the work; its neighbours do the same work but may really run slower: the wide
    # weights (2 x 512 KB) evict theirs from the caches between runs. With one process a side nothing tells
    # that apart from a change, so a neighbour may be flagged — never by anything near block's own ratios
    assert min(r["ratio"] for r in in_block) > 10
    assert all(r["ratio"] < 2 for r in flagged if r not in in_block), flagged
    # one process a side: runs are all there is; the floor comes from the spread of all ops' ratios
    assert res["summary"]["unit"].startswith("run") and res["summary"]["cross_op_floor"] >= 1.0
    assert {r["module_path"] for r in res["rows"] if r["verdict"] == "regression"} >= {"block.0", "block.2"}


def test_per_device_counts_equal_the_inspector(fleet, dataset):
    from executorch.devtools import Inspector

    expect: dict[str, int] = {}
    for d in fleet["dumps"]:
        insp = Inspector(etdump_path=d["etdump"])
        n = sum(len(e.perf_data.raw) for b in insp.event_blocks for e in b.events if e.perf_data is not None)
        expect[d["device"]] = expect.get(d["device"], 0) + n
    got = query(dataset, "SELECT device, count(*) AS n FROM events GROUP BY device ORDER BY device")
    assert {r["device"]: r["n"] for r in got} == expect


def test_views_and_canned_queries(dataset, tmp_path, capsys):
    ops = query(dataset, "SELECT * FROM ops WHERE module_path = 'block.0' AND build = 'n+1' ORDER BY device, "
                         "event_name")
    assert ops and all(r["p10_ms"] <= r["p50_ms"] <= r["p90_ms"] for r in ops)
    raw = query(dataset, "SELECT duration_ms FROM events WHERE module_path = 'block.0' AND build = 'n+1' AND "
                         f"device = '{ops[0]['device']}' AND event_name = '{ops[0]['event_name']}'")
    assert ops[0]["p50_ms"] == pytest.approx(np.percentile([r["duration_ms"] for r in raw], 50))
    runs = query(dataset, "SELECT count(*) AS n, count(latency_ms) AS timed FROM runs")
    assert runs[0]["n"] == runs[0]["timed"] == 8 * 10
    out = tmp_path / "q.json"
    assert main(["query", dataset, "--by", "device", "--format", "json", "-o", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["device"] for r in rows] == ["pixel7", "rpi5"] and all(r["runs"] == 40 for r in rows)
    assert main(["query", dataset, "--top-ops", "3", "--format", "csv"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("event_name,module_path") and len(text) == 4
    assert main(["query", dataset, "SELECT nope FROM events"]) == 1
    assert "query failed" in capsys.readouterr().err


def test_collect_appends_and_skips_bad_files(fleet, tmp_path, capsys):
    good = [d["etdump"] for d in fleet["dumps"] if d["build"] == "n"][:2]
    bad = tmp_path / "garbage.etdp"
    bad.write_bytes(b"\x10\x00\x00\x00not an etdump at all")
    trunc = tmp_path / "cut.etdp"
    trunc.write_bytes(open(good[0], "rb").read()[:500])
    ds = str(tmp_path / "ds")
    assert main(["collect", good[0], str(bad), str(trunc), "-o", ds, "--meta", "device=a", "--meta", "lab=x"]) == 0
    io = capsys.readouterr()
    assert f"skipped {bad}: FormatError" in io.err and f"skipped {trunc}: TruncatedFileError" in io.err
    assert "2 skipped" in io.out
    res = collect([good[1]], ds, meta={"device": "b"}, jobs=2, progress=False)
    assert res.files == 1 and not res.skipped
    assert len([f for f in os.listdir(ds) if f.endswith(".parquet")]) == 2
    rows = query(ds, "SELECT device, lab, count(*) AS n FROM events GROUP BY ALL ORDER BY device")
    assert [(r["device"], r["lab"]) for r in rows] == [("a", "x"), ("b", None)]


def test_parallel_collect_equals_serial(fleet, tmp_path):
    paths = [d["etdump"] for d in fleet["dumps"]]
    one = collect(paths, str(tmp_path / "one"), jobs=1, progress=False)
    two = collect(paths, str(tmp_path / "two"), jobs=2, progress=False)
    assert one.events == two.events > 0
    sql = "SELECT file, run, event_index, duration_ms FROM events ORDER BY file, run, event_index"
    assert query(str(tmp_path / "one"), sql) == query(str(tmp_path / "two"), sql)


def test_dashboard(dataset, tmp_path, browser):
    out = tmp_path / "dash.html"
    assert main(["report", "--dataset", dataset, "-o", str(out)]) == 0
    page = browser.new_page()
    page.goto(out.as_uri())
    assert page.locator("svg").count() >= 1
    assert "Top regressions: build n → n+1" in page.inner_text("body")
    page.screenshot(path=str(tmp_path / "dash.png"), full_page=True)
    page.close()


def test_stats():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 0.05, 40), rng.normal(1, 0.05, 40)
    assert verdict(a, b).verdict == "same"
    assert verdict(a, b * 1.5).verdict == "regression"
    assert verdict(a * 1.5, b).verdict == "improvement"
    assert verdict(a, b * 1.5, method="bootstrap").verdict == "regression"
    assert verdict(a, b * 1.05).verdict == "same"      # significant maybe, but below the minimum effect
    scipy_stats = pytest.importorskip("scipy.stats")
    x, y = np.round(a, 2), np.round(b * 1.03, 2)
    assert mannwhitney_p(x, y) == pytest.approx(
        scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue)


SPARK_SQL = [
    "SELECT device, build, event_name, module_path, node, count, p10_ms, p50_ms, p90_ms FROM ops "
    "ORDER BY device, build, event_name, module_path NULLS LAST, node NULLS LAST",
    "SELECT device, count(*) AS n, sum(duration_ms) AS total FROM events GROUP BY device ORDER BY device",
    "SELECT file, run, latency_ms, ops_ms FROM runs ORDER BY file, run",
]


def _same_rows(a, b):
    assert a[0] == b[0] and len(a[1]) == len(b[1])
    for ra, rb in zip(a[1], b[1]):
        same = [x == pytest.approx(y, rel=1e-9) if isinstance(x, float) else x == y for x, y in zip(ra, rb)]
        assert all(same), (ra, rb)


@pytest.mark.slow
def test_spark_same_rows_as_duckdb(dataset, fleet, spark, tmp_path):
    from etlens.fleet.spark import spark_collect
    from etlens.fleet.sql import query_table

    for sql in SPARK_SQL:
        _same_rows(query_table(dataset, sql, "duckdb"), query_table(dataset, sql, "spark"))
    build = fleet["builds"]["n"]
    paths = [d["etdump"] for d in fleet["dumps"] if d["build"] == "n"]
    res = spark_collect(paths, str(tmp_path / "sp"), meta={"build": "n"}, etrecord=build["etrecord"])
    loc = collect(paths, str(tmp_path / "lo"), meta={"build": "n"}, etrecord=build["etrecord"], progress=False)
    assert res.events == loc.events and res.files == len(paths)
    sql = "SELECT file, run, event_index, module_path, duration_ms FROM events ORDER BY file, run, event_index"
    assert query(str(tmp_path / "sp"), sql) == query(str(tmp_path / "lo"), sql)

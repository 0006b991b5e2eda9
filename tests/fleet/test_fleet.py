"""Fleet: collect real ETDumps of two builds, query them, and compare them (live timings: see BLOCK_LINEARS)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from etlens.cli.main import main
from etlens.cli.options import EXIT_GATE
from etlens.fleet import Side, collect, compare, query
from etlens.fleet.stats import mannwhitney_p, verdict


#: The fleet fixture is measured live (make_fleet.py runs its processes when the cache is cold), on whatever
#: the machine is doing — a CI worker next to another job, a laptop with a browser open. So the verdict tests
#: on it assert only what holds under any load: build n+1's ``block`` linears do 32x the work (measured
#: 30-200x), and effects of 8x and more are found whatever the noise; exit codes and the schema. What else
#: gets called is timing noise's say, live: on a busy CI machine ``inp``/``out`` ran 1.4-1.5x slower in all
#: four processes of n+1 (their weights evicted by the wide ones) and were rightly flagged, and a 9x ReLU of
#: a few microseconds was not. "The widened layer and nothing else", "a planted 1.3x is found", "the same
#: build flags nothing" are tested where the truth is known and the timings fixed: test_recorded.py (real
#: ETDumps recorded once, effects planted in their timings) and test_simulated.py (seeded busy machines).
BLOCK_LINEARS = {("native_call_addmm.out", "block.0"), ("native_call_addmm.out", "block.2")}
#: an effect at least this large is found under any load (block's linears measure 30-200x)
ANY_LOAD = 8.0


def _cmp(ds, a, b):
    return compare(Side.of_dataset(ds, f"build = '{a}'"), Side.of_dataset(ds, f"build = '{b}'"))


def _flagged(res, verdict):
    return [r for r in res["rows"] if r["verdict"] == verdict]


def _linears(res) -> list[dict]:
    return [r for r in res["rows"] if (r["event_name"], r["module_path"]) in BLOCK_LINEARS]


def test_wider_layer_flagged(dataset):
    """Live timings: only what holds under any load. Block's linears (32x the work) are regressions beyond
    8x, as are their modules; no op of ``block`` is an improvement; every row matched by debug handle."""
    res = _cmp(dataset, "n", "n+1")
    rows = _linears(res)
    assert len(rows) == 2 and all(r["verdict"] == "regression" and r["ratio"] > ANY_LOAD for r in rows), rows
    flagged_modules = {r["module_path"] for r in res["modules"] if r["verdict"] == "regression"}
    assert {"block.0", "block.2"} <= flagged_modules
    assert not [r for r in _flagged(res, "improvement") if (r["module_path"] or "").startswith("block")]
    assert all(r["match"].startswith("debug handle, module path and name") for r in res["rows"])
    assert res["summary"]["regressions"] >= 4 and res["summary"]["unit"] == "file"


def test_swapped_sides_report_improvements(dataset):
    """Live timings, swapped (n+1 -> n): block's linears are improvements beyond 8x, never regressions."""
    res = _cmp(dataset, "n+1", "n")
    rows = _linears(res)
    assert len(rows) == 2 and all(r["verdict"] == "improvement" and r["ratio"] < 1 / ANY_LOAD for r in rows), rows
    assert not [r for r in _flagged(res, "regression") if (r["module_path"] or "").startswith("block")]
    assert res["summary"]["improvements"] >= 4


def test_cli_compare_json_and_gate(dataset, tmp_path, capsys):
    out = tmp_path / "c.json"
    html = tmp_path / "c.html"
    """Live timings: exit codes and schema only. n -> n+1 gates (block's 30-200x linears); swapped, the linears
    are improvements (whether some other op is noise-flagged there is not asserted: that is load's say)."""
    rc = main(["compare", dataset, "--where", "build='n'", "--where", "build='n+1'", "--json", "-o", str(out),
               "--html", str(html)])
    assert rc == EXIT_GATE
    doc = json.loads(out.read_text())
    row = doc["rows"][0]
    for key in ("node", "module_path", "event_name", "a_p50_ms", "b_p50_ms", "ratio", "verdict", "floor",
                "p_value", "q_value", "unit_ratio", "spread", "match"):
        assert key in row
    assert row["verdict"] == "regression" and row["ratio"] > row["floor"] > 1
    assert doc["summary"]["unit"] == "file" and row["a_units"] == row["b_units"] == 4
    page = html.read_text()
    assert "<svg" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    capsys.readouterr()
    swapped = ["compare", dataset, "--where", "build='n+1'", "--where", "build='n'", "--format", "json"]
    assert main(swapped) in (0, EXIT_GATE)
    doc = json.loads(capsys.readouterr().out)
    assert {(r["event_name"], r["module_path"]) for r in doc["rows"] if r["verdict"] == "improvement"} >= BLOCK_LINEARS


def test_compare_etdumps_directly(fleet):
    a = [d for d in fleet["dumps"] if d["build"] == "n"][0]
    b = [d for d in fleet["dumps"] if d["build"] == "n+1"][0]
    res = compare(Side.of_etdumps([a["etdump"]], a["etrecord"]), Side.of_etdumps([b["etdump"]], b["etrecord"]))
    # live timings, one process a side: block's linears (32x the work, measured 30-200x) are found under any
    # load; what else is flagged is not asserted (with one process a side, a neighbour the wide weights
    # evicted from the cache, or a preempted process, cannot be told from a change)
    rows = _linears(res)
    assert len(rows) == 2 and all(r["verdict"] == "regression" and r["ratio"] > ANY_LOAD for r in rows), rows
    # one process a side: runs are all there is; the floor comes from the spread of all ops' ratios
    assert res["summary"]["unit"].startswith("run") and res["summary"]["cross_op_floor"] >= 1.0


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

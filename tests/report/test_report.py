"""The main job: the joined HTML report, opened in real headless Chromium with the network blocked."""

from __future__ import annotations

import re

import pytest

from etlens.cli.main import main
from etlens.cli.options import EXIT_GATE

SECTIONS = ["summary", "graph", "program", "delegation", "latency", "numerics", "files"]


@pytest.fixture(scope="module")
def built(artifacts, tmp_path_factory):
    from etlens.report import report_from_artifacts

    case = artifacts["mixed_xnnpack"]
    out = tmp_path_factory.mktemp("report") / "report.html"
    result = report_from_artifacts(case.etdump, str(out), etrecord=case.etrecord, debug_buffer=case.debug_buffer,
                                   pte=case.pte)
    return case, result


@pytest.fixture(scope="module")
def page(built, browser):
    _, result = built
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors, requests = [], []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))

    def route(r):
        requests.append(r.request.url)
        if r.request.url.startswith(("file:", "data:", "about:", "blob:")):
            return r.continue_()
        return r.abort()

    pg.route("**/*", route)
    pg.goto(f"file://{result.path}")
    pg.wait_for_timeout(1500)
    yield pg, errors, requests
    pg.close()


@pytest.mark.browser
def test_every_section_present_no_errors_no_network(page):
    pg, errors, requests = page
    for sid in SECTIONS:
        assert pg.locator(f"section#{sid}").count() == 1, sid
        assert pg.locator(f"section#{sid}").inner_text().strip(), sid
    assert errors == []
    assert all(u.startswith(("file:", "data:", "about:", "blob:")) for u in requests), requests
    csp = pg.locator("meta[http-equiv='Content-Security-Policy']").get_attribute("content")
    assert "default-src 'none'" in csp


@pytest.mark.browser
def test_embedded_viewer_renders_and_answers_clicks(page):
    pg, errors, _ = page
    frame_el = pg.locator("section#graph iframe").first
    frame_el.scroll_into_view_if_needed()
    frame = frame_el.content_frame
    canvas = frame.locator("canvas").first
    canvas.wait_for(timeout=5000)
    box = canvas.bounding_box()
    assert box and box["width"] > 200 and box["height"] > 200
    assert errors == []


@pytest.mark.browser
def test_numbers_equal_the_inspector(built, page):
    from etlens import Inspector

    case, result = built
    pg, _, _ = page
    insp = Inspector(etdump_path=case.etdump, etrecord=case.etrecord, debug_buffer_path=case.debug_buffer)
    df = insp.to_dataframe()
    execute = df[(df.event_block_name == "Execute") & (df.event_name == "Method::execute")]
    expected_total = float(execute["avg (ms)"].mean())
    from etlens.report.page import _ms  # the card's own rounding (3 decimals below 100 ms, 1 above)

    card = pg.locator("[data-card='Total latency'] .value").inner_text()
    assert result.total_latency_ms == pytest.approx(expected_total, rel=1e-12)
    assert card == _ms(result.total_latency_ms)

    # every operator row of the latency table shows the Inspector's average of the same .etdp, as the page
    # rounds it (render._fmt): text for text, whatever the timings were
    from etlens.report.render import _fmt

    ops = df[(df.event_block_name == "Execute") & ~df.event_name.isin(["Method::execute"])]
    rows = pg.locator("#latency-table tbody tr")
    assert rows.count() == len(ops)
    shown: dict[str, list[str]] = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td").all_inner_texts()
        shown.setdefault(cells[0], []).append(cells[3])
    expected: dict[str, list[str]] = {}
    for name, avg in zip(ops.event_name, ops["avg (ms)"]):
        expected.setdefault(str(name), []).append(_fmt(float(avg)))
    assert {k: sorted(v) for k, v in shown.items()} == {k: sorted(v) for k, v in expected.items()}

    # the gap table has one row per calculate_numeric_gap row
    gaps = insp.calculate_numeric_gap("MSE")
    assert pg.locator("#gap-table tbody tr").count() == len(gaps) > 0
    worst = max(max(float(g) for g in row) for row in gaps["gap"])
    assert result.worst_gap == pytest.approx(worst, rel=1e-9, abs=1e-30)


@pytest.mark.browser
def test_delegation_table_matches_get_delegation_info(built, page):
    from etlens import get_delegation_info

    case, _ = built
    pg, _, _ = page
    info = get_delegation_info(case.etrecord)
    df = info.get_operator_delegation_dataframe()
    assert pg.locator("#delegation-table tbody tr").count() == len(df)
    text = pg.locator("section#delegation pre").inner_text()
    assert str(info.num_delegated_nodes) in text and str(info.num_non_delegated_nodes) in text


def test_side_files_written(built):
    import json

    _, result = built
    perfetto = next(p for k, p in result.files.items() if "Perfetto" in k)
    data = json.load(open(perfetto))
    assert data["traceEvents"], "empty Perfetto trace"


def test_report_is_deterministic(built, tmp_path):
    from etlens.report import report_from_artifacts

    case, first = built
    again = report_from_artifacts(case.etdump, str(tmp_path / "report.html"), etrecord=case.etrecord,
                                  debug_buffer=case.debug_buffer, pte=case.pte)
    a = open(first.path, encoding="utf-8").read()
    b = open(again.path, encoding="utf-8").read()
    # file links are relative, so two directories give the same bytes
    assert a == b


def test_cli_gates(artifacts, tmp_path, capsys):
    case = artifacts["mlp_portable"]
    base = ["report", "--etdump", case.etdump, "--etrecord", case.etrecord, "--debug-buffer", case.debug_buffer,
            "-o", str(tmp_path / "r.html")]
    assert main(base) == 0
    out = capsys.readouterr().out
    total = float(re.search(r"total latency ([0-9.]+) ms", out).group(1))
    assert main(base + ["--fail-on-latency-ms", str(total / 10)]) == EXIT_GATE
    assert "fail-on-latency-ms" in capsys.readouterr().err
    assert main(base + ["--fail-on-latency-ms", str(total * 100)]) == 0
    assert main(base + ["--fail-on-gap", "-1"]) == EXIT_GATE
    assert main(base + ["--fail-on-gap", "1e9"]) == 0


def test_cli_bad_input(tmp_path, capsys):
    bad = tmp_path / "x.etdp"
    bad.write_bytes(b"garbage")
    assert main(["report", "--etdump", str(bad), "-o", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "x.etdp" in err and "Traceback" not in err
    assert main(["report", "--demo", "nope", "-o", str(tmp_path / "r.html")]) == 1
    assert "nope" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_end_to_end(tmp_path, capsys):
    """The README's main job on the fastest demo: trace, lower, run, inspect, report."""
    pytest.importorskip("executorch.exir")
    out = tmp_path / "demo.html"
    assert main(["report", "--demo", "mlp", "-o", str(out), "--runs", "2"]) == 0
    html = out.read_text()
    for sid in SECTIONS + ["passes"]:
        assert f"id='{sid}'" in html, sid
    assert (tmp_path / "demo_artifacts" / "mlp.pte").exists()
    assert (tmp_path / "demo.perfetto.json").exists()

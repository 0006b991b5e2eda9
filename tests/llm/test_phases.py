"""LLM phases on timing-only ETDumps: export_llama programs run without a debug buffer.

The phase corpus (``tests/llm/build_phases.py``, fixture ``llm_phases``): a 4-layer Llama exported by
ExecuTorch's own ``export_llama`` with dynamic and with static shapes, run by the real runtime in a
child process, one dump per case: prompts of 1 to 64 tokens, 16 to 256 decode steps, one to four
generate sessions per dump. The run log (every call: phase, session, tokens, position) is the truth;
times are checked against the raw ``Method::execute`` timestamps of the dump.

What is asserted, and why it can be asserted exactly:

- with ``--prompt-len`` (the run log's prompt lengths): every run's phase, session and token count,
  every session's TTFT, prefill and decode tokens/s, and the decode latency percentiles;
- without it: every session split right and, with dynamic shapes, every phase right; on a static
  program only each session's first run is its prefill (prompt tokens and generated tokens run the
  same kernels on the same shapes: the documented limit), token counts marked ``inferred``;
- the documented approximations: a later session whose prompt has only 1-2 tokens (dynamic
  shapes) starts with a run like any decode step, and a later session of a static-shape program
  is found only from its attention time dropping back (the sawtooth fit); both are placed within
  :data:`LOOSE` runs (runs just before a start that the machine slowed read like the new
  session's first runs), and the runs in between are not compared.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.llm.build_phases import CASES
from tests.llm.conftest import FAST_MODES, case_params

pytestmark = pytest.mark.xdist_group("llm")

CASE_IDS = case_params([f"{mode}/{c['name']}" for mode, cases in CASES.items() for c in cases], FAST_MODES)


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    from etlens.cli.main import main

    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _inspect(case, capsys, *extra: str) -> dict:
    code, out, err = _cli(["inspect", "--etdump", case.etdump, "--etrecord", case.etrecord, "--llm", "--format",
                           "json", *extra], capsys)
    assert code == 0, err
    return json.loads(out)


def _forward_execute_ms(case) -> list[float]:
    """``Method::execute`` (ms) of every forward call in run-log order, from the dump's raw timestamps."""
    from etlens.readers.etdump import read_etdump

    dump = read_etdump(case.etdump)
    times = []
    for r in dump.runs:
        for i in range(len(r.kind)):
            nid = int(r.name_id[i])
            if nid >= 0 and dump.strings[nid] == "Method::execute" and r.end_time[i] > r.start_time[i]:
                times.append((int(r.end_time[i]) - int(r.start_time[i])) / 1e6)
                break
    calls = case.calls
    assert len(times) == len(calls), (len(times), len(calls))
    return [t for t, c in zip(times, calls) if c["method"] == "forward"]


def _truth(case) -> list[dict]:
    return [c for c in case.calls if c["method"] == "forward"]


def _starts(sessions: list[int]) -> list[int]:
    return [j for j, s in enumerate(sessions) if j == 0 or sessions[j - 1] != s]


#: a later session whose prompt has 1-2 tokens (dynamic shapes), or any later session of a static-shape program,
#: starts with a run like any decode step: it is found from the attention time dropping back, which places it
#: within this many runs (the documented limit: on a CI machine under load, 3-4 runs in a row before a start were
#: slowed 5-10x, and a slowed run cannot be told from a new session's first)
LOOSE = 3


def _loose(case) -> list[int]:
    """Run indices of session starts that can only be placed approximately (see :data:`LOOSE`)."""
    truth = _truth(case)
    starts = _starts([t["session"] for t in truth])
    return [j for j in starts[1:] if not case.dynamic_shape or truth[j]["n_tokens"] < 3]


def _assert_starts(got: list[int], want: list[int], loose: list[int], name: str) -> set[int]:
    """Session starts equal, the loose ones within :data:`LOOSE` runs; returns the runs whose labels may
    differ because of a loose start (between the true and the found start)."""
    assert len(got) == len(want), (name, got, want)
    fuzzy: set[int] = set()
    for g, w in zip(got, want):
        if w in loose:
            assert abs(g - w) <= LOOSE, (name, got, want)
            fuzzy |= set(range(min(g, w), max(g, w) + 1))
        else:
            assert g == w, (name, got, want)
    return fuzzy


@pytest.mark.parametrize("name", CASE_IDS)
def test_prompt_len_makes_labels_counts_and_speeds_exact(llm_phases, name, capsys):
    case = llm_phases[name]
    truth = _truth(case)
    prompts = ",".join(str(p) for p, _ in case.sessions)
    prof = _inspect(case, capsys, "--prompt-len", prompts)
    runs = prof["runs"]
    assert len(runs) == len(truth)
    fuzzy = _assert_starts(_starts([r["session"] for r in runs]), _starts([t["session"] for t in truth]),
                           _loose(case), name)
    keep = [j for j in range(len(runs)) if j not in fuzzy]
    for key in ("phase", "session", "n_tokens"):
        assert [runs[j][key] for j in keep] == [truth[j][key] for j in keep], (name, key)
    assert {r["phase_source"] for r in runs} == {"inferred"}           # no debug buffer: nothing is read
    assert prof["labels"] == "inferred" and prof["prompt_lens"] == [p for p, _ in case.sessions]
    assert all(r["tokens_source"] == ("read" if not case.dynamic_shape else
                                      "given" if r["phase"] == "prefill" else "inferred") for r in runs)
    # speeds against the raw timestamps and the run log
    ms = _forward_execute_ms(case)
    assert [r["time_ms"] for r in runs] == pytest.approx(ms, rel=1e-9)
    assert len(prof["sessions"]) == len(case.sessions)
    for s, (prompt, decode) in enumerate(case.sessions):
        idx = [j for j, t in enumerate(truth) if t["session"] == s]
        if fuzzy & set(range(idx[0], idx[-1] + 2)):
            continue   # a session next to a loosely placed start: its counts are off by those runs
        pre = [ms[j] for j in idx if truth[j]["phase"] == "prefill"]
        dec = [ms[j] for j in idx if truth[j]["phase"] == "decode"]
        got = prof["sessions"][s]
        assert got["prompt_tokens"] == prompt and got["decode_tokens"] == decode
        assert got["ttft_ms"] == pytest.approx(sum(pre), rel=1e-9)
        assert got["prefill_tokens_per_s"] == pytest.approx(1000 * prompt / sum(pre), rel=1e-9)
        assert got["decode_tokens_per_s"] == pytest.approx(1000 * decode / sum(dec), rel=1e-9)
        assert [got["p50_ms"], got["p90_ms"], got["p99_ms"]] == pytest.approx(
            list(np.percentile(dec, [50, 90, 99])), rel=1e-9)
        assert got["drift_ms_per_100"] is not None
    if not fuzzy:
        dec_all = [m for m, t in zip(ms, truth) if t["phase"] == "decode"]
        assert prof["phases"]["decode"]["tokens_per_s"] == pytest.approx(1000 * len(dec_all) / sum(dec_all),
                                                                         rel=1e-9)
    assert prof["phases"]["prefill"]["tokens"] == sum(p for p, _ in case.sessions)


@pytest.mark.parametrize("name", CASE_IDS)
def test_without_prompt_len_sessions_and_phases_are_inferred(llm_phases, name, capsys):
    case = llm_phases[name]
    truth = _truth(case)
    prof = _inspect(case, capsys)
    runs = prof["runs"]
    assert {r["phase_source"] for r in runs} == {"inferred"}
    fuzzy = _assert_starts(_starts([r["session"] for r in runs]), _starts([t["session"] for t in truth]),
                           _loose(case), name)
    if case.dynamic_shape:
        keep = [j for j in range(len(runs)) if j not in fuzzy]
        assert [runs[j]["phase"] for j in keep] == [truth[j]["phase"] for j in keep], name
        assert all(r["tokens_source"] == "inferred" for r in runs)
        assert any("estimates" in n for n in prof["notes"])
    else:
        # static shapes: every run is one token (read from the program); a prompt's tokens past the first
        # look like generated ones, so only each session's first run is labelled prefill, and a note says so
        assert all(r["n_tokens"] == 1 and r["tokens_source"] == "read" for r in runs)
        starts = set(_starts([r["session"] for r in runs]))
        assert [r["phase"] for r in runs] == ["prefill" if j in starts else "decode" for j in range(len(runs))]
        truth_starts = set(_starts([t["session"] for t in truth]))
        assert all(("prefill" if j in truth_starts else "decode") == runs[j]["phase"]
                   for j in range(len(runs)) if j not in fuzzy), name
        assert any("cannot be told" in n and "--prompt-len" in n for n in prof["notes"])
    assert prof["summary"]["labels"] == "inferred" and prof["summary"]["sessions"] == len(case.sessions)


@pytest.mark.parametrize("name", case_params(["dynamic/p1_g16", "static/p1_g16"], FAST_MODES))
def test_program_facts_from_etrecord_and_pte(llm_phases, name):
    from etlens.analysis.llm_phases import llm_inputs
    from etlens.readers.etrecord import read

    case = llm_phases[name]
    dynamic = case.mode == "dynamic"
    a = llm_inputs(record=read(case.etrecord))
    b = llm_inputs(pte=case.pte)
    assert (a.source, b.source) == ("etrecord", "pte")
    assert a.dynamic is b.dynamic is dynamic and a.has_input_pos and b.has_input_pos
    if dynamic:  # export_llama's range for the tokens length: 1 .. max_seq_len - 1
        assert a.max_tokens == b.max_tokens == 383
    else:
        assert a.tokens_per_call == b.tokens_per_call == 1


def test_read_labels_unchanged_with_a_debug_buffer(llm_corpus):
    """The LLM corpus' dumps with intermediate outputs keep their read labels, now with sessions and sources."""
    from etlens.analysis.inspector import Inspector
    from etlens.analysis.llm import llm_profile

    case = llm_corpus["fp32_dynamic"]
    prof = llm_profile(Inspector(etdump_path=case.etdump, etrecord=case.etrecord,
                                 debug_buffer_path=case.debug_buffer, pte=case.pte))
    truth = [c for c in case.calls if c["method"] == "forward"]
    assert [r.phase for r in prof.runs] == [c["phase"] for c in truth]
    assert {r.phase_source for r in prof.runs} == {"read"} and prof.labels == "read"
    assert {r.session for r in prof.runs} == {0} and len(prof.sessions) == 1
    assert prof.sessions[0].prompt_tokens == case.prompt_tokens
    assert prof.sessions[0].prompt_tokens_source == "read"


def test_fleet_dataset_carries_phase_and_session(llm_phases, tmp_path, capsys):
    cases = [llm_phases["dynamic/multi4"], llm_phases["dynamic/p8_g120"]]
    ds = str(tmp_path / "fleet")
    for i, case in enumerate(cases):
        code, out, err = _cli(["collect", case.etdump, "-o", ds, "--etrecord", case.etrecord, "-j", "1",
                               "--meta", f"device=dev{i}"], capsys)
        assert code == 0, err
    from etlens.fleet.sql import query

    rows = query(ds, "SELECT file, run, phase, session FROM runs WHERE phase IS NOT NULL ORDER BY file, run")
    for case in cases:
        got = [(r["phase"], r["session"]) for r in rows if r["file"] == case.etdump]
        assert got == [(t["phase"], t["session"]) for t in _truth(case)], case.name
    # metadata methods' runs have no phase
    other = query(ds, "SELECT count(*) AS n FROM runs WHERE phase IS NULL AND file = "
                      f"'{cases[0].etdump}'")[0]["n"]
    assert other == sum(c["method"] != "forward" for c in cases[0].calls)
    # decode speed per device, as a user compares builds
    by = query(ds, "SELECT device, count(*) AS n, quantile_cont(latency_ms, 0.5) AS p50 FROM runs "
                   "WHERE phase = 'decode' GROUP BY device ORDER BY device")
    assert [r["n"] for r in by] == [sum(t["phase"] == "decode" for t in _truth(c)) for c in cases]
    for r, case in zip(by, cases):
        ms = [m for m, t in zip(_forward_execute_ms(case), _truth(case)) if t["phase"] == "decode"]
        assert r["p50"] == pytest.approx(float(np.median(ms)), rel=1e-9)


@pytest.mark.slow
def test_prompt_len_errors(llm_phases, capsys):
    case = llm_phases["static/p8_g64"]
    base = ["inspect", "--etdump", case.etdump, "--etrecord", case.etrecord, "--llm"]
    # a malformed value is a usage error at parse time (exit 2), as for report and collect
    for bad, says in (("8,x", "--prompt-len"), ("0", "at least 1 token")):
        with pytest.raises(SystemExit) as exc:
            _cli([*base, "--prompt-len", bad], capsys)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and says in err and "Traceback" not in err, (bad, err)
    code, out, err = _cli([*base, "--prompt-len", "500"], capsys)   # static: one run per prompt token
    assert code == 1 and "only 72 forward run(s)" in err


def test_report_section_shows_sessions(llm_phases, tmp_path, browser):
    from etlens.report import report_from_artifacts

    case = llm_phases["dynamic/multi4"]
    out = tmp_path / "r.html"
    report_from_artifacts(case.etdump, str(out), etrecord=case.etrecord)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    sec = page.locator("section#llm")
    sec.scroll_into_view_if_needed()
    assert page.locator("#llm-sessions tbody tr").count() == len(case.sessions)
    text = sec.inner_text()
    assert "timing-only dump" in text and "inferred" in text and "Generate sessions" in text
    sec.screenshot(path=str(tmp_path / "llm.png"))
    page.close()
    assert not errors, errors


def test_drift_is_the_theil_sen_slope_of_decode_latency(llm_phases, capsys):
    """Drift over a 256-step session: the median pairwise slope of (position, ms), in ms per 100 tokens,
    computed here by brute force from the raw timestamps and the run log's positions."""
    import statistics

    case = llm_phases["dynamic/p64_g256"]
    truth = _truth(case)
    prof = _inspect(case, capsys, "--prompt-len", "64")
    ms = _forward_execute_ms(case)
    pts = [(t["input_pos"], m) for t, m in zip(truth, ms) if t["phase"] == "decode"]
    slopes = [(pts[j][1] - pts[i][1]) / (pts[j][0] - pts[i][0])
              for i in range(len(pts)) for j in range(i + 1, len(pts))]
    s = prof["sessions"][0]
    assert s["drift_ms_per_100"] == pytest.approx(100 * statistics.median(slopes), rel=1e-9)
    q = len(pts) // 4
    first, last = statistics.median(m for _, m in pts[:q]), statistics.median(m for _, m in pts[-q:])
    assert s["drift_ratio"] == pytest.approx(last / first, rel=1e-9)
    assert [r["position"] for r in prof["runs"]] == [t["input_pos"] for t in truth]

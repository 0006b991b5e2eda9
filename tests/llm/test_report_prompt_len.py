"""``etlens report --prompt-len`` / ``collect --prompt-len``: timing-only LLM dumps with exact token counts.

On the phase corpus (``tests/llm/build_phases.py``: export_llama programs run without a debug buffer, with
the run log of every call), given the run log's prompt lengths the report must show what
``etlens inspect --llm --prompt-len`` shows: every run's label (``prefill (8 tokens)`` / ``decode``), session
and token count equal to the run log, and the same per-session TTFT and tokens/s; the page is checked in
headless Chromium. ``collect`` with them gives the fleet dataset's ``phase`` column of a static program's
prompt runs right. Bad values are usage errors (exit 2) caught when the command line is parsed.
"""

from __future__ import annotations

import json

import pytest

from tests.llm.conftest import FAST_MODES, case_params

pytestmark = pytest.mark.xdist_group("llm")


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    from etlens.cli.main import main

    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _label(call: dict) -> str:
    if call["phase"] == "prefill":
        n = call["n_tokens"]
        return f"prefill ({n} token{'s' if n != 1 else ''})"
    return call["phase"]


def _prompt_lens(case) -> str:
    return ",".join(str(p) for p, _ in case.sessions)


@pytest.mark.parametrize("name", case_params(["static/multi3", "dynamic/multi4"], FAST_MODES))
def test_report_llm_section_matches_the_run_log_and_inspect(llm_phases, name, tmp_path, capsys, browser):
    case = llm_phases[name]
    truth = [c for c in case.calls if c["method"] == "forward"]
    out = tmp_path / "r.html"
    base = ["--etdump", case.etdump, "--etrecord", case.etrecord]
    code, _, err = _cli(["report", *base, "--prompt-len", _prompt_lens(case), "-o", str(out)], capsys)
    assert code == 0, err
    code, text, err = _cli(["inspect", *base, "--llm", "--format", "json", "--prompt-len", _prompt_lens(case)],
                           capsys)
    assert code == 0, err
    inspect = json.loads(text)
    assert [r["label"] for r in inspect["runs"]] == [_label(c) for c in truth]

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    sec = page.locator("section#llm")
    assert f"prompt lengths given: {', '.join(str(p) for p, _ in case.sessions)}" in sec.inner_text()
    # every run: label, session and token count as the run log has them (the runs table: run, session, phase,
    # source, input_pos, tokens, ms, ms/token)
    rows = page.locator("#llm-runs tbody tr").evaluate_all(
        "trs => trs.map(tr => Array.from(tr.cells, td => td.textContent.trim()))")
    assert [(r[1], r[2], r[5]) for r in rows] == [(str(c["session"]), _label(c), str(c["n_tokens"])) for c in truth]
    # per session: prompt tokens as given, the same TTFT and decode tokens/s as inspect's JSON
    sessions = page.locator("#llm-sessions tbody tr").evaluate_all(
        "trs => trs.map(tr => Array.from(tr.cells, td => td.textContent.trim()))")
    assert [s[2] for s in sessions] == [str(p) for p, _ in case.sessions]
    assert len(sessions) == len(inspect["sessions"])
    for shown, s in zip(sessions, inspect["sessions"]):
        assert float(shown[4]) == pytest.approx(s["ttft_ms"], rel=5e-3)
        assert float(shown[6]) == pytest.approx(s["decode_tokens_per_s"], rel=5e-3)
    page.close()
    assert not errors, errors


@pytest.mark.parametrize("value, message", [("8,x", "'8,x': give the prompt's token count"),
                                            ("0", "0: every prompt has at least 1 token"),
                                            (",", "',': give the prompt's token count")])
def test_report_prompt_len_bad_values_are_usage_errors(value, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _cli(["report", "--etdump", str(tmp_path / "none.etdp"), "--prompt-len", value], capsys)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"argument --prompt-len: {message}" in err and "Traceback" not in err


def test_report_prompt_len_goes_with_etdump(tmp_path, capsys):
    code, _, err = _cli(["report", "--dataset", str(tmp_path), "--prompt-len", "8", "-o", str(tmp_path / "r.html")],
                        capsys)
    assert code == 1 and "--prompt-len goes with --etdump" in err


@pytest.mark.slow
def test_collect_prompt_len_labels_a_static_prompt_prefill(llm_phases, tmp_path, capsys):
    """A static-shape program feeds its prompt one token per run, like decode steps: without prompt lengths
    the fleet's ``phase`` column counts only each session's first run as prefill; with them, every run's
    phase and session equal the run log's (collect --prompt-len)."""
    from etlens.fleet.sql import query

    case = llm_phases["static/multi3"]
    truth = [c for c in case.calls if c["method"] == "forward"]
    got = {}
    for flag in ([], ["--prompt-len", _prompt_lens(case)]):
        ds = str(tmp_path / f"fleet{len(flag)}")
        code, _, err = _cli(["collect", case.etdump, "-o", ds, "--etrecord", case.etrecord, "-j", "1", *flag],
                            capsys)
        assert code == 0, err
        got[bool(flag)] = query(ds, "SELECT phase, session FROM runs WHERE phase IS NOT NULL ORDER BY run")
    assert [(r["phase"], r["session"]) for r in got[True]] == [(c["phase"], c["session"]) for c in truth]
    assert sum(r["phase"] == "prefill" for r in got[False]) == len(case.sessions) < sum(p for p, _ in case.sessions)
    with pytest.raises(SystemExit) as exc:
        _cli(["collect", case.etdump, "-o", str(tmp_path / "bad"), "--prompt-len", "4,x"], capsys)
    assert exc.value.code == 2

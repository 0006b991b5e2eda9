"""LLMs exported by ExecuTorch's own export_llama (tests/llm/build.py): every subcommand, per-method
headline, prefill/decode labels, the KV cache in the memory view.

Truth comes from ExecuTorch's Inspector where it works (on the timing-only dump: it asserts on the
prefill+decode dump with intermediate outputs), from the raw ETDump timestamps, and from the
manifest the generator wrote (what was run, with which tokens and positions).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from tests.llm.build import CASES as LLM_CASES
from tests.llm.conftest import case_params

#: every test that reads the LLM corpus runs on one xdist worker (``--dist loadgroup``): the other worker
#: goes on with other tests while this one builds the corpus, instead of waiting on its file lock
pytestmark = pytest.mark.xdist_group("llm")

CLI_CASES = case_params(("fp32_dynamic", "q8da4w_dynamic"))  # CLI smoke on two; the numbers below on all three
ALL_CASES = case_params(LLM_CASES)


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    from etlens.cli.main import main

    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _raw_execute_ms(etdump: str) -> list[float]:
    """``Method::execute`` durations (ms) of every run that has one, in dump order, from raw timestamps."""
    from etlens.readers.etdump import read_etdump

    dump = read_etdump(etdump)
    out = []
    for r in dump.runs:
        for i in range(len(r.kind)):
            nid = int(r.name_id[i])
            if nid >= 0 and dump.strings[nid] == "Method::execute" and r.end_time[i] > r.start_time[i]:
                out.append((int(r.end_time[i]) - int(r.start_time[i])) / 1e6)
                break
    return out


def _forward_truth(case) -> float:
    """Mean Method::execute of the forward calls: runs with an execute event follow the manifest's calls."""
    times = _raw_execute_ms(case.etdump)
    calls = case.calls
    assert len(times) == len(calls), (len(times), len(calls))
    return float(np.mean([t for t, c in zip(times, calls) if c["method"] == "forward"]))


def _executorch_forward_avg(case) -> float:
    """ExecuTorch's Inspector on the timing-only dump: Method::execute avg of the block that ran operators."""
    from executorch.devtools import Inspector as EtInspector

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        insp = EtInspector(etdump_path=case.etdump_profile, etrecord=case.etrecord)
    blocks = [b for b in insp.event_blocks if any(e.name == "DELEGATE_CALL" for e in b.events)]
    assert len(blocks) == 1, [b.name for b in insp.event_blocks]
    ex = [e for e in blocks[0].events if e.name == "Method::execute"]
    return float(ex[0].perf_data.avg)


@pytest.mark.parametrize("name", ALL_CASES)
def test_headline_is_forward_not_an_average_of_methods(llm_corpus, name):
    from etlens.report.collect import ReportInputs, collect

    case = llm_corpus[name]
    # the timing-only dump: ExecuTorch's per-method average is the reference
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no false "ETRecord does not match" warning
        data = collect(ReportInputs(etdump=case.etdump_profile, etrecord=case.etrecord,
                                    pte=case.pte))
    assert data.method == "forward"
    assert data.runs == case.forward_runs
    assert data.total_latency_ms == pytest.approx(_executorch_forward_avg(case), rel=1e-9), name
    # the dump with intermediate outputs (ExecuTorch's Inspector asserts on it): raw timestamps are the truth
    data = collect(ReportInputs(etdump=case.etdump, etrecord=case.etrecord, debug_buffer=case.debug_buffer,
                                pte=case.pte))
    assert data.method == "forward" and data.runs == case.forward_runs
    assert data.total_latency_ms == pytest.approx(_forward_truth(case), rel=1e-9), name
    others = [m for m in data.methods if m.method != "forward"]
    assert sum(m.runs for m in others) == len(case.calls) - case.forward_runs
    # (not asserted: that each metadata call took less time than forward — those calls are measured live, once
    # each, for a few microseconds, and one preemption on a busy machine makes one longer than a forward)
    # the delegated share is the one `inspect` prints (same method, same definition)
    share = data.delegated_time_share
    assert share is not None and 0 < share < 1
    from etlens.views.tables import summary_paragraph

    text = summary_paragraph(data.inspector)  # what `etlens inspect` prints
    assert f"Delegated share of operator time: {100 * share:.1f}%." in text, text


@pytest.mark.parametrize("name", ALL_CASES)
def test_prefill_decode_labels_match_the_manifest(llm_corpus, name):
    from etlens.analysis.inspector import Inspector
    from etlens.analysis.llm import llm_profile

    case = llm_corpus[name]
    insp = Inspector(etdump_path=case.etdump, etrecord=case.etrecord, debug_buffer_path=case.debug_buffer,
                     pte=case.pte)
    prof = llm_profile(insp)
    assert prof is not None and prof.method == "forward"
    truth = [c for c in case.calls if c["method"] == "forward"]
    assert [(r.n_tokens, r.input_pos) for r in prof.runs] == [(c["n_tokens"], c["input_pos"]) for c in truth]
    assert [r.phase for r in prof.runs] == [c["phase"] for c in truth], name
    assert prof.phases["prefill"].tokens == case.prompt_tokens
    if case.dynamic_shape:
        assert prof.runs[0].label == f"prefill ({case.prompt_tokens} tokens)"
        assert sorted(prof.by_tokens) == [1, case.prompt_tokens]
    else:  # one token per call: the prompt/generation boundary comes from the greedy rule
        assert prof.notes and "greedy" in prof.notes[0]
        # without the .pte the tokens cannot be read back: the documented fallback (position 0 only)
        bare = llm_profile(Inspector(etdump_path=case.etdump, debug_buffer_path=case.debug_buffer))
        assert [r.phase for r in bare.runs] == ["prefill"] + ["decode"] * (len(truth) - 1)
    assert prof.phases["decode"].runs >= case.decode_steps
    times = _raw_execute_ms(case.etdump)
    fwd = [t for t, c in zip(times, case.calls) if c["method"] == "forward"]
    assert [r.time_ms for r in prof.runs] == pytest.approx(fwd, rel=1e-9)
    dec = prof.phases["decode"]
    assert dec.tokens_per_s == pytest.approx(1000 * dec.tokens / dec.total_ms)
    classes = {row[0] for row in prof.class_table()}
    assert {"attention", "kv_update", "linear", "norm"} <= classes, classes
    # class times add up to the operator time of each run (no event counted twice or lost)
    tot = sum(sum(v.values()) for v in prof.class_ms.values())
    m = next(t for t in _timings(insp) if t.method == "forward")
    assert tot == pytest.approx((m.operator_avg + m.delegate_avg) * m.runs, rel=1e-6)


def _timings(insp):
    from etlens.analysis.inspector.methods import method_timings

    return method_timings(insp)


@pytest.mark.parametrize("name", ALL_CASES)
def test_kv_cache_is_named_state_not_waste(llm_corpus, name):
    from etlens.analysis.memory import analyze_memory, attach_etrecord
    from etlens.readers.etrecord import read as read_etrecord
    from etlens.readers.pte import read

    case = llm_corpus[name]
    rep = analyze_memory(read(case.pte))
    attach_etrecord(rep, read_etrecord(case.etrecord))
    m = rep.method("forward")
    p = case.params
    n_layers, head_dim = p["n_layers"], p["dim"] // p["n_heads"]
    state = m.state
    assert len(state) == 2 * n_layers, name
    assert sorted(t.node for t in state) == sorted(f"layers.{i}.attention.kv_cache.{kv}_cache"
                                                   for i in range(n_layers) for kv in "kv")
    n = len(m.instructions)
    assert all(t.first == 0 and t.last == n - 1 for t in state)
    kv = m.kv_cache()
    assert kv["max_seq_len"] == case.max_seq_len
    assert kv["bytes_per_token"] == 2 * n_layers * p["n_kv_heads"] * head_dim * 4
    assert kv["bytes"] == kv["bytes_per_token"] * case.max_seq_len
    arena = m.arenas[0]
    # live all method long: every live-bytes sample includes the cache, so it is never waste
    assert min(arena.live_bytes) >= kv["bytes"]
    assert arena.waste <= arena.size - kv["bytes"]
    assert not [o for o in m.overlaps if o.kind == "conflict"]
    js = m.to_json()["state"]
    assert js["bytes_per_token"] == kv["bytes_per_token"]


@pytest.mark.parametrize("case_name", CLI_CASES)
def test_every_subcommand(llm_corpus, case_name, tmp_path, capsys):
    case = llm_corpus[case_name]
    files = ["--etdump", case.etdump, "--etrecord", case.etrecord, "--debug-buffer", case.debug_buffer]
    code, out, err = _cli(["info", case.pte], capsys)
    assert code == 0 and "forward" in out
    code, out, err = _cli(["inspect", *files, "--pte", case.pte], capsys)
    assert code == 0, err
    assert "does not match" not in err
    assert "Main method 'forward'" in out and "LLM (forward): prefill" in out
    code, out, err = _cli(["inspect", *files, "--pte", case.pte, "--llm", "--format", "json"], capsys)
    prof = json.loads(out)
    assert code == 0 and [r["phase"] for r in prof["runs"]][-1] == "decode"
    code, out, err = _cli(["inspect", "--etdump", case.etdump, "--method", "forward", "--format", "json"], capsys)
    rows = json.loads(out)
    assert code == 0 and rows and all(r["event_name"] != "" for r in rows)
    code, out, err = _cli(["inspect", "--etdump", case.etdump, "--method", "nope"], capsys)
    assert code == 1 and "methods that ran" in err
    code, out, err = _cli(["delegation", case.pte], capsys)
    assert code == 0 and "Xnnpack" in out
    code, out, err = _cli(["memory", case.pte, "--etrecord", case.etrecord, "--html", str(tmp_path / "m.html")],
                          capsys)
    assert code == 0 and "kv_cache.k_cache" in out and "per token" in out
    code, out, err = _cli(["memory", case.pte, "--method", "forward", "--format", "json"], capsys)
    assert code == 0 and [m["name"] for m in json.loads(out)["methods"]] == ["forward"]
    code, out, err = _cli(["size", case.pte], capsys)
    assert code == 0
    code, out, err = _cli(["view", case.pte, "-o", str(tmp_path / "v.html")], capsys)
    assert code == 0 and (tmp_path / "v.html").stat().st_size > 0
    code, out, err = _cli(["collect", case.etdump, "-o", str(tmp_path / "ds"), "--pte", case.pte, "-j", "1"], capsys)
    assert code == 0, err
    code, out, err = _cli(["gap", *files], capsys)
    assert code in (0, 1) and "internal error" not in err, err  # gap's numerics: tests of the llmnum work
    code, out, err = _cli(["report", *files, "--pte", case.pte, "-o", str(tmp_path / "r.html")], capsys)
    assert code == 0, err
    assert "internal error" not in err and "does not match" not in err
    page = (tmp_path / "r.html").read_text()
    assert "LLM: prefill and decode" in page and "prefill (" in page
    trace = json.loads((tmp_path / "r.perfetto.json").read_text())
    tracks = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"]
    assert any("forward · prefill (" in t for t in tracks) and any("forward · decode @" in t for t in tracks)
    code, out, err = _cli(["report", "--etdump", case.etdump, "--pte", case.pte, "--method", "(constant methods)",
                           "-o", str(tmp_path / "c.html")], capsys)
    assert code == 0, err
    code, out, err = _cli(["report", "--etdump", case.etdump, "--method", "nope", "-o", str(tmp_path / "n.html")],
                          capsys)
    assert code == 1 and "methods that ran" in err


def test_llm_section_renders(llm_corpus, tmp_path, browser):
    from etlens.report import report_from_artifacts

    case = llm_corpus["fp32_dynamic"]
    out = tmp_path / "r.html"
    report_from_artifacts(case.etdump, str(out), etrecord=case.etrecord, debug_buffer=case.debug_buffer,
                          pte=case.pte)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    sec = page.locator("section#llm")
    sec.scroll_into_view_if_needed()
    assert sec.is_visible()
    assert page.locator("#llm svg.llm-runs rect").count() >= case.forward_runs
    assert page.locator("#llm svg.llm-classes rect").count() >= 4
    text = sec.inner_text()
    assert "prefill (5 tokens)" in text and "tokens/s" in text
    sec.screenshot(path=str(tmp_path / "llm.png"))
    page.close()
    assert not errors, errors

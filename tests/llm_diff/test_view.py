"""The llm-diff text and page on a synthetic result (no ExecuTorch): content, escaping, and Chromium draws it."""

from __future__ import annotations

import numpy as np
import pytest

from etlens.analysis.llm_diff.compare import LlmDiffResult, read_tokens
from etlens.analysis.llm_diff.kv import compare_kv, kv_path
from etlens.analysis.llm_diff.layers import compare_layers
from etlens.analysis.llm_diff.metrics import position_stats, summarize
from etlens.errors import EtlensError
from etlens.views.llm_diff import render_html, render_text


def _result(n: int = 32, extras: bool = False) -> LlmDiffResult:
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 50, n).tolist()
    a = rng.normal(size=(n, 50))
    rows = position_stats(a, a + 0.3 * rng.normal(size=a.shape), tokens)
    order = [f"layers.{i}.{p}" for i in range(3) for p in ("attention", "feed_forward")] + \
        [f"layers.{i}" for i in range(3)]
    base = {m: rng.normal(size=(n, 8)) for m in order}
    new = {m: v * (3.0 if m.startswith("layers.1.feed") else 1.0) for m, v in base.items()}
    table = compare_layers(base, new, order)
    s = summarize(rows)
    s["first_divergent_layer"] = table.first_divergent
    phases = {"load_ms": 12.0, "first_token_ms": 1.5, "decode_tokens_per_s": 300.0, "source": "etdump"}
    builds = {"base": {"path": "a<b>.pte", "phases": phases}, "new": {"path": "q8.pte", "phases": phases}}
    res = LlmDiffResult(summary=s, positions=rows, tokens=tokens, builds=builds, layers=table)
    if extras:  # KV rows per layer (layer 2's V disturbed from position 5 on) and two greedy continuations
        kb = {kv_path(i, w): rng.normal(size=(n, 8)) for i in range(3) for w in "kv"}
        kn = {p: v.copy() for p, v in kb.items()}
        kn[kv_path(2, "v")][5:] *= 1.5
        res.kv = compare_kv(kb, kn)
        res.generation = {"steps": 6, "prompt_tokens": n, "base": [1, 2, 3, 4, 5, 6], "new": [1, 2, 9, 9, 9, 9],
                          "first_divergence": 2, "first_divergence_position": n + 2, "same_tokens": 2}
        res.summary["greedy_first_divergence"] = 2
    return res


def test_text_names_the_layer_and_the_summary():
    res = _result()
    text = render_text(res)
    assert "first divergent layer: layers.1.feed_forward" in text and "KLD mean" in text and "decode tok/s" in text


def test_kv_and_generation_in_text_json_and_page():
    res = _result(extras=True)
    assert res.kv.first_nonzero == {"layer": 2, "cache": "v", "position": 5}
    assert res.kv.worst["layer"] == 2 and res.kv.worst["cache"] == "v" and res.kv.k_mean == [0, 0, 0]
    text = render_text(res)
    assert "part at generated token 2 (sequence position 34)" in text and "layer 2 V at position 5" in text
    doc = res.to_json()
    assert doc["kv_cache"]["v"][2][4] == 0 and doc["kv_cache"]["v"][2][5] == pytest.approx(0.5)
    assert doc["generation"]["first_divergence"] == 2 and doc["summary"]["greedy_first_divergence"] == 2
    html = render_html(res)
    assert html.count("<svg") == 3 and "KV caches by position" in html and html.count("class='gd'") == 8


def test_json_has_the_contract_fields():
    doc = _result().to_json()
    assert {"kld_mean", "kld_max", "top1_agreement", "first_divergent_layer"} <= set(doc["summary"])
    assert all({"kld", "top1_same"} <= set(p) for p in doc["positions"])
    assert doc["layers"]["first_divergent"] == "layers.1.feed_forward"


def test_page_escapes_and_is_offline():
    html = render_html(_result())
    assert "a&lt;b&gt;.pte" in html and "a<b>.pte" not in html
    assert "Content-Security-Policy" in html and "http" not in html.replace("http-equiv", "")
    assert html.count("<svg") == 2


def test_tokens_file_errors(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("1 2 x3")
    with pytest.raises(EtlensError, match="entry 3 is 'x3'"):
        read_tokens(str(p))
    p.write_text("7")
    with pytest.raises(EtlensError, match="at least 2"):
        read_tokens(str(p))
    p.write_text("1,2\n3 4")
    assert read_tokens(str(p)) == [1, 2, 3, 4]


@pytest.mark.browser
def test_page_draws_in_chromium(browser, tmp_path):
    path = tmp_path / "llm-diff.html"
    path.write_text(render_html(_result(64, extras=True)))
    page = browser.new_page(viewport={"width": 1200, "height": 1400})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith("file:") else None)
    page.goto(path.as_uri())
    assert page.locator("svg.chart rect").count() == 64
    assert page.locator("svg.heat rect").count() >= 9 * 64
    assert page.locator("text.ml.fd").nth(0).text_content() == "layers.1.feed_forward"
    assert page.locator("section.kv text.ml.fd").text_content() == "layers.2 V"
    assert page.locator("section.kv svg.heat rect").count() >= 6 * 64
    assert page.locator("section.gen td.gd").count() == 8
    box = page.locator("svg.heat").nth(0).bounding_box()
    assert box["width"] > 500 and box["height"] > 100
    page.screenshot(path=str(tmp_path / "llm-diff.png"), full_page=True)
    assert errors == [] and requests == []
    page.close()

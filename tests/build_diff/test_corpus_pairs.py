"""The whole build-diff corpus: one planted change per pair, the planted module the top cause with the
right kind (slow: four more lowerings, two of them quantized); plus the page with both graphs."""

from __future__ import annotations

import pytest

from etlens.analysis.build_diff import diff_builds
from tests.build_diff.corpus import PAIRS

#: one worker builds the corpus while the other goes on (``--dist loadgroup``), instead of waiting on its lock
pytestmark = pytest.mark.xdist_group("build_diff")


def _pair(name, fast_corpus, slow_corpus):
    base = PAIRS[name][0]
    root_b = fast_corpus if (fast_corpus / name).exists() else slow_corpus
    root_a = fast_corpus if (fast_corpus / base).exists() else slow_corpus
    return diff_builds(root_a / base, root_b / name)


@pytest.mark.slow
def test_planted_module_is_top_cause_in_every_pair(fast_corpus, slow_corpus):
    hits, report = 0, []
    for name, (_base, kind, module) in PAIRS.items():
        d = _pair(name, fast_corpus, slow_corpus)
        top = d.causes[0] if d.causes else None
        got = (top.module_path, top.kind) if top else None
        ok = d.summary["verdict"] == "same" and not d.causes if kind is None else got == (module, kind)
        hits += ok
        report.append(f"{name}: {got} {d.summary['verdict']}")
    assert hits == len(PAIRS), report        # the contract asks >= 5 of 6


@pytest.mark.slow
def test_quantization_pair_details(slow_corpus):
    d = diff_builds(slow_corpus / "q8", slow_corpus / "q8_keep")
    top = d.causes[0]
    assert (top.module_path, top.kind) == ("layers.1", "quantization") and top.share > 0.8
    assert top.const_bytes > 0                      # float weights are 4x the int8 ones
    assert "quantized in A, float in B" in top.explanation
    assert d.summary["size_ratio"] > 1.3
    gap = d.summary["output_gap"]                   # debug buffers on both sides: the outputs differ a little
    assert gap is not None and 20 < gap["snr_db"] < 120


@pytest.mark.slow
def test_copies_and_decomposition(fast_corpus, slow_corpus):
    d = diff_builds(fast_corpus / "base", slow_corpus / "copies")
    assert (d.causes[0].module_path, d.causes[0].kind) == ("stem", "copies")
    assert "_clone_dim_order" in d.causes[0].explanation
    d = diff_builds(fast_corpus / "base", slow_corpus / "decomp")
    top = d.causes[0]
    assert (top.module_path, top.kind) == ("layers.2", "decomposition")
    row = top.rows[0]
    assert row.a.ops == ["linear"] and sorted(row.b.ops) == ["addmm", "permute_copy"]


def test_page_marks_changed_ops(fast_corpus, tmp_path, browser):
    from tests.conftest import block_remote

    from etlens.views.build_diff import changed_overlays, write_build_diff_html

    d = diff_builds(fast_corpus / "base", fast_corpus / "offload")
    oa, ob = changed_overlays(d)
    top = d.causes[0]
    assert {n for r in top.rows for n in r.b.view_names} <= set(ob)
    assert any("/" in n for n in oa), "A's layers.1 runs inside a delegate: named <call>/<node> as the viewer does"
    path = write_build_diff_html(d, tmp_path / "diff.html")
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    blocked = block_remote(page)
    page.goto(f"file://{path}")
    page.wait_for_timeout(1500)
    assert not errors and not blocked
    title = page.text_content("body") or ""
    assert "layers.1" in title and "share of the change" in title
    page.close()


@pytest.mark.slow
def test_model_with_two_build_settings(tmp_path):
    import json

    from etlens.cli.main import main as cli_main

    out = tmp_path / "d.json"
    code = cli_main(["diff", "--demo", "mlp", "--a-backend", "xnnpack", "--b-backend", "portable", "--runs", "5",
                     "--keep", str(tmp_path / "builds"), "--format", "json", "-o", str(out)])
    assert code == 0
    doc = json.loads(out.read_text())
    assert (tmp_path / "builds" / "a" / "model.pte").exists() and (tmp_path / "builds" / "b" / "model.etdp").exists()
    kinds = {c["kind"] for c in doc["causes"]}
    assert doc["causes"][0]["kind"] == "placement" and kinds <= {"placement", "decomposition", "memory_plan",
                                                                   "copies", "kernel", "pass"}
    assert all(r["b"] is None or r["b"]["placement"] == "portable" for r in doc["ops"])
    assert "portable delegates nothing" in doc["causes"][0]["explanation"]   # the partitioner's side of it

"""Planted single-layer faults on real builds over 10 seeds: the fp32 ``.pte`` with one weight scaled in place
(:mod:`tests.llm_diff.plant`, byte for byte the export of the disturbed checkpoint), run by ExecuTorch's runtime
against the clean build. The goal: the planted layer named in at least 9 of 10 seeds, never a later one.

One warm worker child serves all 20 runs (token statistics and the layer table; the CLI would start a child
per pair).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.xdist_group("llm")]  # the LLM and phase corpora's builds are shared: one worker builds them


@pytest.mark.slow
def test_planted_fp32_layer_named_in_9_of_10_seeds_never_later(llm_diff_corpus):
    from tests.llm_diff.conftest import PLANTED_SEEDS

    rows, found = _planted(llm_diff_corpus, range(PLANTED_SEEDS))
    assert found >= 9, rows


def test_planted_fp32_layer_named_for_two_seeds(llm_diff_fp32):
    """The fast case: seeds 1 and 2 on the real runtime (the small 2-layer build), each named exactly."""
    rows, found = _planted(llm_diff_fp32, [1, 2])
    assert found == 2, rows


def _planted(llm_diff_corpus, seeds):
    from etlens.analysis.llm_diff.compare import Side, llm_diff, read_tokens
    from etlens.builder.worker import Worker

    c = llm_diff_corpus.cases
    tokens = read_tokens(llm_diff_corpus.tokens)
    found, rows = 0, []
    with Worker(prewarm=["executorch.extension.pybindings.portable_lib"]) as w:
        for seed in seeds:
            case = c[f"fp32_fault{seed}"]
            res = llm_diff(Side(c["fp32"].pte, etrecord=c["fp32"].etrecord), Side(case.pte, etrecord=case.etrecord),
                           tokens, worker=w)
            f, got = case.fault, res.summary["first_divergent_layer_index"]
            rows.append((seed, f["layer"], f["weight"], f["scale"], res.summary["first_divergent_layer"]))
            assert got is not None and got <= f["layer"], rows
            found += got == f["layer"]
            # the KV caches: bit-identical through the faulty layer (no fault weight is wk / wv), differing after it
            kv = res.kv
            assert all(kv.k_mean[i] == 0 and kv.v_mean[i] == 0 for i in range(f["layer"] + 1)), (rows[-1], kv.k_mean)
            last = llm_diff_corpus.n_layers - 1
            assert (kv.first_nonzero or {}).get("layer") == (f["layer"] + 1 if f["layer"] < last else None), rows[-1]
    print("\n".join(f"seed {s}: layers.{layer}.{wt} x{k} -> {named}" for s, layer, wt, k, named in rows))
    return rows, found

"""etlens.analysis.llm_diff.metrics on synthetic logits with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from etlens.analysis.llm_diff.metrics import kl_divergence, log_softmax, position_stats, summarize


def test_kld_known_value_and_direction():
    p, q = np.log([[0.5, 0.5]]), np.log([[0.9, 0.1]])
    expected = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)  # 0.5108...
    assert kl_divergence(p, q)[0] == pytest.approx(expected, rel=1e-12)
    # KL(P||Q) is not symmetric: the base is the reference
    assert kl_divergence(q, p)[0] == pytest.approx(0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5))


def test_kld_shift_invariant_and_zero_for_identical():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(7, 300)).astype(np.float32)
    assert np.all(kl_divergence(a, a) == 0)
    assert np.allclose(kl_divergence(a, a + 123.0), 0, atol=1e-9)  # softmax ignores a constant (float32 rounding)
    assert np.all(kl_divergence(a, a + rng.normal(size=a.shape)) > 0)


def test_log_softmax_stable_for_huge_logits():
    lp = log_softmax([[1e30, 0.0, -1e30]])
    assert lp[0, 0] == 0.0 and np.isfinite(lp[0, 1])


def test_position_rows_and_summary():
    tokens = [3, 1, 2, 0]
    base = np.zeros((4, 4))
    base[np.arange(4), [1, 2, 0, 3]] = 5.0  # base predicts the next token each time
    base[2] = [5.0, 0.0, 1.0, -1.0]
    new = base.copy()
    new[2] = [0.0, 5.0, -1.0, 1.0]  # position 2 prefers token 1 instead of 0 (the actual next token)
    rows = position_stats(base, new, tokens, k=2)
    assert [r["top1_same"] for r in rows] == [True, True, False, True]
    assert rows[0]["kld"] == 0 and rows[2]["kld"] > 1
    assert rows[3]["next_token"] is None and rows[3]["logp_base"] is None
    assert rows[0]["logp_base"] == pytest.approx(float(log_softmax(base[:1])[0, 1]))
    assert rows[2]["topk_overlap"] == 0.0 and rows[1]["topk_overlap"] == 1.0  # top-2: {0, 2} vs {1, 3}
    s = summarize(rows)
    assert s["top1_agreement"] == 0.75 and s["same_top_pct"] == 75.0
    assert s["first_top1_mismatch"] == 2
    assert s["kld_max"] == pytest.approx(rows[2]["kld"])
    assert s["kld_mean"] == pytest.approx(rows[2]["kld"] / 4)
    assert s["ppl_ratio"] > 1  # the new build is less sure of the actual next tokens


def test_uniform_logits_perplexity_is_vocab_size():
    v = 50
    rows = position_stats(np.zeros((6, v)), np.zeros((6, v)), list(range(6)))
    s = summarize(rows)
    assert s["ppl_base"] == pytest.approx(v) and s["ppl_ratio"] == pytest.approx(1.0)
    assert s["kld_mean"] == 0 and s["top1_agreement"] == 1.0 and s["first_top1_mismatch"] is None


def test_shape_errors():
    with pytest.raises(ValueError, match="one shape"):
        position_stats(np.zeros((3, 5)), np.zeros((3, 6)), [1, 2, 3])
    with pytest.raises(ValueError, match="tokens"):
        position_stats(np.zeros((3, 5)), np.zeros((3, 5)), [1, 2])

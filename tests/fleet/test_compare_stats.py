"""Compare statistics, the building blocks: the moderated t test, the floors, FDR, the process-state model.

Pure functions on fixed numbers (seeded draws), so every assertion is deterministic. The verdicts end to end
are tested on data whose truth is known: real ETDumps recorded once with effects planted in their timings
(``test_recorded.py``) and seeded simulations of quiet, busy and loaded machines (``test_simulated.py``).
Nothing here measures live: how the rule does on processes measured now, on this machine (the 20-group verdict
protocol, planted 1.3x real work, same build back to back and minutes apart) is a benchmark,
``benchmarks/bench_compare.py`` — timing noise decides those numbers, so they are reported, not asserted.
"""

from __future__ import annotations

import numpy as np
import pytest

from etlens.fleet.stats import (cross_op_floor, fdr_bh, replicated_verdict, side_shift, state_loading, state_scores,
                                t_pvalue, unit_medians, variance_prior)


def test_moderated_t_and_floors():
    scipy_stats = pytest.importorskip("scipy.stats")
    for t, df in ((0.3, 3), (2.5, 7.5), (-4.0, 10), (12.0, 4)):
        assert t_pvalue(t, df) == pytest.approx(2 * scipy_stats.t.sf(abs(t), df), rel=1e-9)
    # one process's runs: the median per unit, in log space
    assert np.allclose(unit_medians([1.0, 9.0, 1.2, 2.0, 2.0, 2.4], ["a", "a", "a", "b", "b", "b"]),
                       np.log([1.2, 2.0]))
    rng = np.random.default_rng(1)
    quiet = [(rng.normal(0, 0.01, 4), rng.normal(0, 0.01, 4)) for _ in range(20)]
    prior = variance_prior(quiet)
    assert 0.005 < np.sqrt(prior[0]) < 0.02 and prior[1] > 0
    ya = np.log(np.array([1.0, 1.01, 0.99, 1.0]))
    v = replicated_verdict(ya, ya + np.log(1.3), prior=prior, pa_ms=1.0, pb_ms=1.3)
    assert v.verdict == "regression" and v.ratio == pytest.approx(1.3) and not v.noisy
    v = replicated_verdict(ya, ya + np.log(1.1), prior=prior, pa_ms=1.0, pb_ms=1.1)
    assert v.verdict == "same" and v.p < 1e-6      # significant, but under the 15 % minimum effect
    # an op whose processes scatter by ~20 %: its own spread sets the floor, so 1.3x is not enough
    wild = np.log(np.array([1.0, 1.25, 0.8, 1.1]))
    v = replicated_verdict(wild, wild + np.log(1.3), prior=prior, pa_ms=1.0, pb_ms=1.3)
    assert v.noisy and v.floor > 1.3 and v.verdict == "same"
    assert replicated_verdict(ya, ya + np.log(1.3), prior=prior, pa_ms=0.001, pb_ms=0.0013).verdict == "same"
    # Benjamini-Hochberg q values against scipy's
    pv = np.array([0.0025, 0.0066, 0.3, 0.04, 0.9, 0.011, 0.5])
    assert np.allclose(fdr_bh(pv), scipy_stats.false_discovery_control(pv, method="bh"))
    # one process a side: the floor is the spread of the ops' log ratios (a changed op does not move it)
    lr = list(rng.normal(0, 0.05, 30)) + [np.log(3.0)]
    assert 0.1 < cross_op_floor(lr) < 0.25 and cross_op_floor(lr[:3]) == 0.0


def test_state_model_and_side_shift():
    rng = np.random.default_rng(3)
    # 12 ops x 10 processes (5 a side); a process state that slows ops by their own loading (0.5x-2x)
    load = np.r_[np.full(4, 0.5), np.full(4, 1.0), np.full(4, 2.0)]
    z = np.r_[[-0.2, 0.1, 0.0, 0.15, -0.05], [0.1, -0.3, 0.2, 0.0, 0.0]]
    y = rng.normal(-2, 1, 12)[:, None] + load[:, None] * z[None, :] + rng.normal(0, 0.005, (12, 10))
    c = np.c_[y[:, :5] - y[:, :5].mean(1, keepdims=True), y[:, 5:] - y[:, 5:].mean(1, keepdims=True)]
    got = state_scores(c)
    zc = np.r_[z[:5] - z[:5].mean(), z[5:] - z[5:].mean()]
    assert np.allclose(got, zc, atol=0.02) and abs(got[:5].sum()) < 1e-9 and abs(got[5:].sum()) < 1e-9
    assert state_loading(c[-1], got) == pytest.approx(2.0, rel=0.05)
    assert not state_scores(c[:4]).any() and not state_scores(c[:, :2]).any()     # too few ops / units
    # ratios = loading x the sides' state difference + noise; two ops really changed: the fit ignores them
    d = load * 0.1 + rng.normal(0, 0.005, 12)
    d[[2, 7]] += np.log(1.3)
    cc, delta, n = side_shift(d, load, state_bound=1.0)
    assert delta == pytest.approx(0.1, abs=0.01) and abs(cc) < 0.01 and n == 10
    assert side_shift(d, load, state_bound=0.04)[1] == pytest.approx(0.04)      # clipped to what the scatter explains
    # a common shift beyond min_effect is a real change of the whole program: not taken
    assert side_shift(np.full(12, np.log(1.4)), np.ones(12), state_bound=0.0) == (0.0, 0.0, 0)
    assert side_shift(np.full(12, np.log(1.1)), np.ones(12), state_bound=0.0)[0] == pytest.approx(np.log(1.1))
    # five of twelve ops really changed (a kernel every conv uses): the fit still follows the other seven
    d5 = load * 0.1
    d5[[0, 2, 4, 6, 8]] += np.log(1.5)
    assert side_shift(d5, load, state_bound=1.0)[1] == pytest.approx(0.1, abs=1e-9)
    # half the model 100x faster (a build that shrank a block, seen on a loaded CI machine): those ops are out
    # of the chance share's reach and do not drag it; too few ops left in reach: nothing is taken off
    d6 = load * 0.1
    d6[[0, 1, 4, 5, 8, 9]] = np.log(0.01)
    assert side_shift(d6, load, state_bound=0.4)[1] == pytest.approx(0.1, abs=1e-9)
    d6[[2, 6]] = np.log(0.01)
    assert side_shift(d6, load, state_bound=0.4) == (0.0, 0.0, 0)
    assert side_shift(d[:4], load[:4], state_bound=1.0) == (0.0, 0.0, 0)
    # the verdict judges the op's ratio relative to the shift, with the shift's own uncertainty
    prior = (0.01 ** 2, 4.0)
    ya = np.log(np.array([1.0, 1.01, 0.99, 1.0]))
    v = replicated_verdict(ya, ya + np.log(1.3 * 1.1), prior=prior, pa_ms=1.0, pb_ms=1.43, shift=np.log(1.1))
    assert v.verdict == "regression" and v.ratio == pytest.approx(1.3)
    v = replicated_verdict(ya, ya + np.log(1.1), prior=prior, pa_ms=1.0, pb_ms=1.1, shift=np.log(1.1))
    assert v.verdict == "same" and v.ratio == pytest.approx(1.0)
    v = replicated_verdict(ya, ya + np.log(1.3), prior=prior, pa_ms=1.0, pb_ms=1.3, shift_var=1.0)
    assert v.verdict == "same" and v.p > 0.01

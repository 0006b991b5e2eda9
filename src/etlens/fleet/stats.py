"""Is B slower than A, or is that noise? A verdict per op from the per-run samples of two sides.

:func:`verdict` tests the two samples with the Mann-Whitney U test (two-sided; its normal
approximation computed here, scipy's exact test for fewer than 8 runs a side) or, for fewer runs
without scipy, a bootstrap confidence interval on the shift of the median. A difference is only a
``regression`` / ``improvement`` when it is both *significant* (p below ``alpha``, or the interval
excludes zero) and *large enough*: the p50 ratio is beyond ``1 ± min_effect`` and the p50 delta at
least ``min_delta_ms`` — so a 10 % wobble of a 2 µs op over a thousand runs does not turn red.

Example::

    from etlens.fleet.stats import verdict
    verdict([1.0, 1.1, 0.9] * 5, [2.0, 2.1, 1.9] * 5)   # -> Verdict('regression', p=..., ...)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Verdict", "verdict", "mannwhitney_p", "REGRESSION", "IMPROVEMENT", "SAME", "DEFAULTS"]

REGRESSION, IMPROVEMENT, SAME = "regression", "improvement", "same"

#: default thresholds: significance level, minimum relative p50 change, minimum absolute p50 change (ms)
DEFAULTS = {"alpha": 0.01, "min_effect": 0.25, "min_delta_ms": 0.005}


@dataclass
class Verdict:
    """``verdict`` (regression / improvement / same), the test's ``p`` value (None: too few samples),
    the ``method`` used and the 95 % interval of the median shift (``ci_low_ms``/``ci_high_ms``, bootstrap only)."""

    verdict: str
    p: float | None
    method: str
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None


def _bootstrap(a: np.ndarray, b: np.ndarray, iters: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """95 % bootstrap interval of ``median(b) - median(a)`` and a two-sided bootstrap p value."""
    rng = np.random.default_rng(seed)
    ma = np.median(rng.choice(a, (iters, a.size)), axis=1)
    mb = np.median(rng.choice(b, (iters, b.size)), axis=1)
    d = mb - ma
    lo, hi = np.percentile(d, [2.5, 97.5])
    p = 2 * min(float(np.mean(d <= 0)), float(np.mean(d >= 0)))
    return float(lo), float(hi), min(1.0, p)


#: from this many samples per side the normal approximation of U is used (as scipy does past 8)
_ASYMPTOTIC_N = 8


def _has_scipy() -> bool:
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        return False
    return True


def mannwhitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p value.

    From :data:`_ASYMPTOTIC_N` samples per side: the normal approximation with tie and continuity
    corrections (scipy's ``method="asymptotic"``, computed here with numpy: importing scipy.stats costs
    seconds). Smaller samples: scipy's exact test (``auto``).
    """
    if np.ptp(np.r_[a, b]) == 0:
        return 1.0
    n1, n2 = a.size, b.size
    if min(n1, n2) < _ASYMPTOTIC_N:
        from scipy.stats import mannwhitneyu

        return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    from math import erfc, sqrt

    allv = np.r_[a, b]
    order = np.argsort(allv, kind="mergesort")
    sv = allv[order]
    _, first, counts = np.unique(sv, return_index=True, return_counts=True)
    avg_rank = first + (counts + 1) / 2.0           # 1-based average rank of each distinct value
    ranks = np.empty(allv.size)
    ranks[order] = np.repeat(avg_rank, counts)
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    mu = n1 * n2 / 2.0
    tie = (counts ** 3 - counts).sum()
    sigma = sqrt(n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / sigma
    return float(min(1.0, erfc(max(z, 0.0) / sqrt(2.0))))


def verdict(a, b, *, alpha: float = DEFAULTS["alpha"], min_effect: float = DEFAULTS["min_effect"],
            min_delta_ms: float = DEFAULTS["min_delta_ms"], method: str = "auto") -> Verdict:
    """Compare samples ``a`` and ``b`` (durations in ms, one per run); see the module doc for the rule.

    ``method``: ``auto`` (Mann-Whitney when scipy imports, else bootstrap), ``mannwhitney`` or ``bootstrap``.
    Fewer than 3 samples on a side: always ``same`` (no evidence either way), ``p`` None.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size < 3 or b.size < 3:
        return Verdict(SAME, None, "too few runs")
    pa, pb = float(np.median(a)), float(np.median(b))
    lo = hi = None
    if method == "auto":
        method = "mannwhitney" if min(a.size, b.size) >= _ASYMPTOTIC_N or _has_scipy() else "bootstrap"
    if method == "mannwhitney":
        p = mannwhitney_p(a, b)
        significant = p < alpha
    else:
        lo, hi, p = _bootstrap(a, b)
        significant = lo > 0 or hi < 0
    delta = pb - pa
    ratio = pb / pa if pa > 0 else (np.inf if pb > 0 else 1.0)
    big = abs(delta) >= min_delta_ms and (ratio >= 1 + min_effect or ratio <= 1 / (1 + min_effect))
    if significant and big:
        return Verdict(REGRESSION if delta > 0 else IMPROVEMENT, p, method, lo, hi)
    return Verdict(SAME, p, method, lo, hi)

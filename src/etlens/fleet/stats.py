"""Is B slower than A, or is that noise? A verdict per op from the per-run samples of two sides.

Two rules live here.

**Processes as the unit** (:func:`replicated_verdict`, what ``etlens compare`` uses whenever a side has
runs from two or more processes — ETDump files, or devices with ``unit="device"``). Runs inside one
process are repeated measures, not independent samples: they share that process's memory layout, caches
and the machine's load of that moment, so 10 runs of one process are not 10 replicates (treating them
so is what flagged unchanged ops between two builds of one program). Each process is reduced to the
median of its runs (robust to the cold first run and to preemption spikes), in log space (timings are
multiplicative); the two sides' process medians are compared with a *moderated* two-sample t test: the
op's own process-to-process variance is pooled with the typical variance of all ops of the comparison
(``prior``, :func:`variance_prior`) as limma does for few replicates, so 3 processes a side give a usable
test and one wild op cannot claim a tiny variance by luck.

Before that, each process's *state* is taken off (:func:`state_scores`): a process that ran while the
machine was busier, or got a boosted core or friendlier memory, is slower or faster in every op at once —
10-20 % from one process to the next on a shared machine, more than the 1.3x of one op that must still be
found — and each op by its own sensitivity (a "fast" process: matmuls 0.88x, weight permutes 0.68x, ReLUs
0.42x). One score per process times one loading per op (the first principal component of the ops' values
centred per side) is removed from every op; what remains is each op's own process-to-process spread (one
degree of freedom less). The scores are centred per side, so the sides' means stay; but one side may have
drawn more fast processes than the other, which moves every op by its loading: :func:`side_shift` fits
that shared part (robustly, from the ops that did not change) within what the scores' scatter can explain,
and each op's ratio is judged relative to it. A common shift beyond that is a real change of the whole
program and stays; the whole-model latency row is always judged as measured, its processes' scatter its
spread.

A difference is a ``regression`` / ``improvement`` only when it is significant (p < ``alpha``) **and**
beyond the *effect floor* ``max(log(1 + min_effect), noise_k * s)``, where ``s`` is that op's (moderated)
process-to-process standard deviation measured on the same build — the spread of the unchanged op
itself — **and** at least ``min_delta_ms``. An op whose floor is above ``min_effect`` is *unchanged but
noisy*: changes smaller than its floor cannot be told from its own spread (the report lists them).

The floor also never drops below ``noise_k`` times the *drift* between the sides (:func:`cross_op_floor`):
the robust spread of the log ratios of all ops of the comparison beyond what their sampling noise explains.
When A and B were measured apart in time and the machine's load changed in between, every op moves a
little, each by its own amount; that spread across the mostly unchanged ops is the size of change the
comparison cannot vouch for. The term counts only when the ops' ratios, each divided by its standard
error, scatter with a robust SD over :data:`DRIFT_Z` (2; about 1 when only sampling noise moves them):
otherwise it is zero. Ops that changed grossly (more
than twice their own floor) are left out of that spread, so a build that makes half the model 10x slower
does not raise the floor of the other half; fewer than 5 ops left: no drift term.

**One process a side** (:func:`verdict`): only runs are available, so the process-to-process spread is
unknown. The runs are tested with Mann-Whitney U as before, and the effect floor comes from the spread
of the log ratios of all matched ops (:func:`cross_op_floor`): unchanged ops show how far two processes
drift apart.

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

__all__ = ["Verdict", "verdict", "mannwhitney_p", "REGRESSION", "IMPROVEMENT", "SAME", "DEFAULTS", "MIN_SPEED_OPS",
           "replicated_verdict", "unit_medians", "unit_table", "state_scores", "state_loading", "side_shift",
           "variance_prior", "pooled_variance", "cross_op_floor", "t_pvalue", "fdr_bh"]

REGRESSION, IMPROVEMENT, SAME = "regression", "improvement", "same"

#: default thresholds: significance level, minimum relative change, minimum absolute p50 change (ms), how
#: many of an op's own process-to-process standard deviations (log scale) a change must exceed, and the false
#: discovery rate (Benjamini-Hochberg) over all the ops of one comparison
DEFAULTS = {"alpha": 0.01, "min_effect": 0.15, "min_delta_ms": 0.005, "noise_k": 3.0, "fdr": 0.05}


@dataclass
class Verdict:
    """``verdict`` (regression / improvement / same), the test's ``p`` value (None: too few samples),
    the ``method`` used and the 95 % interval of the median shift (``ci_low_ms``/``ci_high_ms``, bootstrap only)."""

    verdict: str
    p: float | None
    method: str
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    #: processes-as-unit only: the ratio of geometric means of the process medians, the effect floor
    #: (a ratio: changes within ``1/floor .. floor`` are never a verdict), the op's process-to-process
    #: spread (relative, ``exp(s) - 1``), units a side, and whether the floor is set by that spread
    ratio: float | None = None
    floor: float | None = None
    spread: float | None = None
    units: tuple[int, int] | None = None
    noisy: bool = False


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
            min_delta_ms: float = DEFAULTS["min_delta_ms"], method: str = "auto", floor: float = 0.0,
            noise_k: float = DEFAULTS["noise_k"]) -> Verdict:
    """Compare samples ``a`` and ``b`` (durations in ms, one per run, one process a side); module doc for the rule.

    ``method``: ``auto`` (Mann-Whitney when scipy imports, else bootstrap), ``mannwhitney`` or ``bootstrap``.
    ``floor``: a data-derived minimum |log ratio| (:func:`cross_op_floor`), on top of ``min_effect``.
    Fewer than 3 samples on a side: always ``same`` (no evidence either way), ``p`` None.
    """
    del noise_k  # the floor already carries it
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
    fl = max(float(np.log1p(min_effect)), floor)
    big = abs(delta) >= min_delta_ms and (ratio >= np.exp(fl) or ratio <= np.exp(-fl))
    extra = {"floor": float(np.exp(fl)), "units": (1, 1), "noisy": floor > np.log1p(min_effect)}
    if significant and big:
        return Verdict(REGRESSION if delta > 0 else IMPROVEMENT, p, method, lo, hi, **extra)
    return Verdict(SAME, p, method, lo, hi, **extra)


# --------------------------------------------------------------------------- processes as the unit


def unit_table(samples, units) -> tuple[np.ndarray, np.ndarray]:
    """``(unit labels, log of each unit's median run)``, sorted by label: the replicates of one op on one side."""
    x = np.asarray(samples, dtype=np.float64)
    u = np.asarray(units)
    ok = np.isfinite(x) & (x > 0)
    x, u = x[ok], u[ok]
    if not x.size:
        return u[:0], np.zeros(0)
    order = np.argsort(u, kind="stable")
    x, u = x[order], u[order]
    starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
    return u[starts], np.log(np.array([np.median(seg) for seg in np.split(x, starts[1:])]))


def unit_medians(samples, units) -> np.ndarray:
    """Log of the median run of each unit (process / device): the replicates of one op on one side."""
    return unit_table(samples, units)[1]


#: fewer ops seen in every unit than this: no process-state model (too few ops to tell a state from an op)
MIN_SPEED_OPS = 5


def state_scores(centered) -> np.ndarray:
    """Each unit's *state* score from ``centered`` (ops x units of log unit medians, each side's op means
    taken off, only ops seen in every unit).

    A process that ran while the machine was busier, or got a boosted core or friendlier memory, is
    slower or faster in every op at once — but not by one factor: measured on a shared 2-core machine, a
    "fast" process ran the matmuls 0.88x, the weight permutes 0.68x and the ReLUs 0.42x of the others
    (memory and cache state hit an op by how much memory traffic it does). That is one hidden number per
    process (its score) times one sensitivity per op (its loading): the first principal component of the
    centred matrix. Scores sum to zero on each side (the columns do), so the sides'
    means are untouched; loadings are scaled so the median op's is 1, which puts a score on the scale of
    that op's log time. Zeros with fewer than :data:`MIN_SPEED_OPS` ops or 3 units.
    """
    c = np.asarray(centered, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] < MIN_SPEED_OPS or c.shape[1] < 3 or not np.isfinite(c).all():
        return np.zeros(c.shape[1] if c.ndim == 2 else 0)
    u, sv, vt = np.linalg.svd(c, full_matrices=False)
    load = u[:, 0] * sv[0]
    scale = float(np.median(np.abs(load)))
    if scale <= 0:
        return np.zeros(c.shape[1])
    sign = 1.0 if np.median(load) >= 0 else -1.0
    return sign * scale * vt[0]


def state_loading(centered, z) -> float:
    """One op's loading on the state scores ``z`` (least squares, no intercept; its values centred per side)."""
    c = np.asarray(centered, dtype=np.float64)
    z = np.asarray(z, dtype=np.float64)
    zz = float((z * z).sum())
    return float((c * z).sum() / zz) if zz > 0 else 0.0


def side_shift(d, load, *, state_bound: float,
               min_effect: float = DEFAULTS["min_effect"]) -> tuple[float, float, int]:
    """``(c, delta, ops used)``: the part of the ops' log ratios ``d`` the two sides share by chance.

    Most ops did not change, so their ratios are ``load * delta + c`` (only ops within ``log(1 + min_effect)
    + state_bound * |load|`` of 1x are used: what chance could have made): ``delta`` the difference of the
    sides' mean process state (one side happened to get more fast processes), ``c`` what is left in
    common. ``delta`` is the least-absolute-deviations fit through the origin (the median of ``d / load``
    weighted by ``|load|``: up to half the ops may have really changed and it still follows the others),
    clipped to ``state_bound`` (what the scores' scatter can explain); ``c`` the median residual of the ops
    within 3 robust SDs of the fit, taken only within ``log(1 + min_effect)`` (a larger common shift is a
    real change of the whole program). ``(0, 0, 0)`` with fewer than :data:`MIN_SPEED_OPS` usable ops.
    """
    x = np.asarray(d, dtype=np.float64)
    lo = np.asarray(load, dtype=np.float64)
    # only ops whose ratio the chance share could have made: a build that makes half the model 100x faster
    # must not drag the fit (those ops are changed, whatever the rest says)
    reach = float(np.log1p(min_effect)) + state_bound * np.abs(lo)
    ok = np.isfinite(x) & np.isfinite(lo) & (np.abs(lo) > 1e-9) & (np.abs(x) <= reach)
    if ok.sum() < MIN_SPEED_OPS:
        return 0.0, 0.0, 0
    delta = float(np.clip(_weighted_median(x[ok] / lo[ok], np.abs(lo[ok])), -state_bound, state_bound))
    r = x - lo * delta
    scale = max(1.4826 * float(np.median(np.abs(r[ok] - np.median(r[ok])))), 0.02)
    keep = ok & (np.abs(r - np.median(r[ok])) <= 3 * scale)
    c = float(np.median(r[keep]))
    if abs(c) > np.log1p(min_effect):
        c = 0.0
    return c, delta, int(keep.sum())


def _weighted_median(v: np.ndarray, w: np.ndarray) -> float:
    order = np.argsort(v)
    v, cw = v[order], np.cumsum(w[order])
    return float(v[np.searchsorted(cw, cw[-1] / 2.0)])


def _ss(y: np.ndarray) -> tuple[float, int]:
    return (float(((y - y.mean()) ** 2).sum()), y.size - 1) if y.size > 1 else (0.0, 0)


def pooled_variance(ya: np.ndarray, yb: np.ndarray, df_lost: int = 0) -> tuple[float, int]:
    """Within-side variance of the unit medians pooled over both sides, and its degrees of freedom
    (``df_lost``: parameters already fitted to these values, e.g. the op's loading on the process state)."""
    sa, da = _ss(ya)
    sb, db = _ss(yb)
    df = max(da + db - df_lost, 0)
    return ((sa + sb) / df if df else float("nan")), df


#: prior degrees of freedom of the moderated variance: the typical op's variance counts as this many replicates
PRIOR_DF = 4.0


def variance_prior(pairs, df_lost: int = 0) -> tuple[float, float]:
    """``(s0², d0)``: the typical process-to-process variance over all ops of a comparison.

    ``pairs``: ``(ya, yb)`` unit-median arrays, one per op. ``s0²`` is the median of the ops' pooled
    variances (robust to the few ops that really changed or are wild), ``d0`` :data:`PRIOR_DF`;
    ``(nan, 0)`` when no op has two units on a side.
    """
    v = [pooled_variance(ya, yb, df_lost) for ya, yb in pairs]
    v = [s for s, df in v if df > 0]
    if not v:
        return float("nan"), 0.0
    return float(np.median(v)), PRIOR_DF


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    from math import exp, lgamma, log

    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_pvalue(t: float, df: float) -> float:
    """Two-sided p value of Student's t with ``df`` degrees of freedom (no scipy needed)."""
    if not np.isfinite(t):
        return 0.0
    return float(min(1.0, _betainc(df / 2.0, 0.5, df / (df + t * t))))


def replicated_verdict(ya: np.ndarray, yb: np.ndarray, *, prior: tuple[float, float], pa_ms: float, pb_ms: float,
                       alpha: float = DEFAULTS["alpha"], min_effect: float = DEFAULTS["min_effect"],
                       min_delta_ms: float = DEFAULTS["min_delta_ms"],
                       noise_k: float = DEFAULTS["noise_k"], shared_floor: float = 0.0, shift: float = 0.0,
                       shift_var: float = 0.0, df_lost: int = 0) -> Verdict:
    """Verdict from the log unit medians ``ya``/``yb`` of one op (module doc: processes as the unit).

    ``prior``: :func:`variance_prior` of the comparison; ``pa_ms``/``pb_ms``: the p50s shown (the
    absolute ``min_delta_ms`` gate uses them); ``shared_floor``: the comparison-wide floor
    (|log ratio|, :func:`cross_op_floor` of all ops' process-median ratios) — it only bites when the
    sides drifted apart as a whole (measured at different times, under different load). ``shift``: the
    share of :func:`side_shift` every op carries, taken off the op's log ratio (``shift_var``: its variance,
    added to the test's); ``df_lost``: parameters already fitted to ``ya``/``yb`` (the state loading).
    """
    na, nb = ya.size, yb.size
    if na < 1 or nb < 1:
        return Verdict(SAME, None, "too few processes", units=(na, nb))
    s2, df = pooled_variance(ya, yb, df_lost)
    s0, d0 = prior
    if not np.isfinite(s0):
        s0, d0 = 0.0, 0.0
    if df + d0 <= 0:
        return Verdict(SAME, None, "too few processes", units=(na, nb))
    s2m = ((df * s2 if df else 0.0) + d0 * s0) / (df + d0)     # moderated variance (limma's rule)
    s = float(np.sqrt(s2m))
    d = float(yb.mean() - ya.mean()) - shift
    se = float(np.sqrt(s2m * (1.0 / na + 1.0 / nb) + shift_var))
    p = t_pvalue(d / se, df + d0) if se > 0 else (1.0 if d == 0 else 0.0)
    floor = max(float(np.log1p(min_effect)), noise_k * s, shared_floor)
    big = abs(d) >= floor and abs(pb_ms - pa_ms) >= min_delta_ms
    extra = {"ratio": float(np.exp(d)), "floor": float(np.exp(floor)), "spread": float(np.expm1(s)),
             "units": (na, nb), "noisy": noise_k * s > np.log1p(min_effect)}
    if p < alpha and big:
        return Verdict(REGRESSION if d > 0 else IMPROVEMENT, p, "moderated t on process medians", **extra)
    return Verdict(SAME, p, "moderated t on process medians", **extra)


def fdr_bh(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p values (q values) of the tests ``p``, in their order."""
    p = np.asarray(p, dtype=np.float64)
    n = p.size
    if not n:
        return p
    order = np.argsort(p)
    q = p[order] * (n / np.arange(1, n + 1))      # factor >= 1, so q >= p also in floating point
    q = np.minimum.accumulate(q[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.clip(q, p[order], 1.0)
    return out


def cross_op_floor(log_ratios, noise_k: float = DEFAULTS["noise_k"], sampling_var=None) -> float:
    """Effect floor (|log ratio|) from the spread of many ops' log ratios between the two sides.

    Most ops of a comparison did not change, so the robust spread (1.4826 x MAD) of their log ratios is
    how far the two sides drift apart. ``sampling_var``: each op's sampling variance of its log ratio
    (processes as the unit); its median is subtracted, so what remains is the drift *beyond* what the
    replicates explain (zero for interleaved measurements). Without it (one process a side) the whole
    spread counts. ``noise_k`` of those is the floor. Fewer than 5 ops: 0.
    """
    x = np.asarray(log_ratios, dtype=np.float64)
    ok = np.isfinite(x)
    if ok.sum() < 5:
        return 0.0
    x = x[ok]
    var = (1.4826 * float(np.median(np.abs(x - np.median(x))))) ** 2
    if sampling_var is not None:
        sv = np.asarray(sampling_var, dtype=np.float64)[ok]
        # drift only when the ops scatter clearly more than their replicates explain: the robust spread of
        # the standardised ratios is over DRIFT_Z (1 without drift); a handful of ops cannot show less
        z = (x - np.median(x)) / np.sqrt(np.maximum(sv, 1e-12))
        if 1.4826 * float(np.median(np.abs(z - np.median(z)))) < DRIFT_Z:
            return 0.0
        var -= float(np.median(sv))
    return float(noise_k * np.sqrt(max(var, 0.0)))


#: the standardised spread of the ops' ratios from which the sides count as drifted apart (1: no drift)
DRIFT_Z = 2.0

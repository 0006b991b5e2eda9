"""Per-session LLM speed: time to first token, prefill and decode tokens/s, per-token latency and its drift.

A *session* is one generate call: a prefill (the prompt: one run of ``n`` tokens, or ``n`` runs of one
token when shapes are static) followed by decode steps (one token each). Per session:

- **time to first token** (``ttft_ms``): the prefill's ``Method::execute`` time, summed over its runs
  (the first generated token is the argmax of the prefill's last logits); ``ttft_wall_ms`` also
  counts the host's time between the prefill runs (the same for a one-call prefill);
- **prefill tokens/s**: prompt tokens / prefill time; **decode tokens/s**: decode runs / decode time;
- **per-token latency** of the decode steps: p50 / p90 / p99 (linear interpolation, as numpy);
- **drift**: the Theil-Sen slope of decode latency against the token's position, in ms per 100
  tokens (robust to a few preempted runs), and the ratio of the last quarter's median to the first
  quarter's: does decoding slow down as the KV cache fills?

Pure functions over lists of numbers; :func:`session_stats` is what :mod:`.label` and the views use.

Example::

    s = session_stats(0, prefill_ms=[8.3], prefill_tokens=8, decode_ms=[0.3] * 120,
                      decode_pos=list(range(8, 128)))
    s.ttft_ms, s.decode_tokens_per_s, s.p50_ms, s.drift_ms_per_100
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

import numpy as np

__all__ = ["SessionStats", "session_stats", "theil_sen", "percentiles"]


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 90, 99)) -> list[float]:
    """Linear-interpolated percentiles (numpy's default); NaN for no values."""
    v = np.asarray([x for x in values if x == x], dtype=np.float64)
    if not v.size:
        return [math.nan] * len(qs)
    return [float(x) for x in np.percentile(v, qs)]


def theil_sen(x: Sequence[float], y: Sequence[float], max_points: int = 600) -> float:
    """The median of the pairwise slopes ``(y_j - y_i) / (x_j - x_i)``: a line fit that a few outliers
    (a run preempted by the OS) do not move. NaN with fewer than 3 points. Past ``max_points`` the
    points are thinned evenly (the pairs grow quadratically)."""
    xa, ya = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ok = ~(np.isnan(xa) | np.isnan(ya))
    xa, ya = xa[ok], ya[ok]
    if xa.size < 3:
        return math.nan
    if xa.size > max_points:
        keep = np.linspace(0, xa.size - 1, max_points).round().astype(int)
        xa, ya = xa[keep], ya[keep]
    i, j = np.triu_indices(xa.size, 1)
    dx = xa[j] - xa[i]
    good = dx != 0
    if not good.any():
        return math.nan
    return float(np.median((ya[j] - ya[i])[good] / dx[good]))


@dataclass
class SessionStats:
    """One generate session's numbers (times in ms; NaN / None when not measurable)."""

    session: int
    first_run: int
    runs: int
    prefill_runs: int
    prompt_tokens: Optional[int]
    prompt_tokens_source: str          # "read" | "given" | "inferred"
    decode_tokens: int
    ttft_ms: float
    ttft_wall_ms: float
    prefill_ms: float
    decode_ms: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    drift_ms_per_100: float
    drift_ratio: float

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def session_stats(session: int, prefill_ms: Sequence[float], prefill_tokens: Optional[int],
                  decode_ms: Sequence[float], decode_pos: Sequence[Optional[int]], *, first_run: int = 0,
                  prefill_wall_ms: Optional[float] = None, tokens_source: str = "inferred") -> SessionStats:
    """The :class:`SessionStats` of one session from its runs' times (see the module docstring).

    ``decode_pos``: each decode step's position in the cache (None when unknown: the step's index
    is used, which gives the same slope)."""
    pre = float(sum(prefill_ms))
    dec = [float(x) for x in decode_ms]
    dsum = float(sum(dec))
    p50, p90, p99 = percentiles(dec)
    xs = [float(p) if p is not None else float(k) for k, p in enumerate(decode_pos)]
    slope = theil_sen(xs, dec)
    ratio = math.nan
    if len(dec) >= 8:
        q = len(dec) // 4
        first, last = float(np.median(dec[:q])), float(np.median(dec[-q:]))
        ratio = last / first if first > 0 else math.nan
    return SessionStats(
        session=session, first_run=first_run, runs=len(prefill_ms) + len(dec), prefill_runs=len(prefill_ms),
        prompt_tokens=prefill_tokens, prompt_tokens_source=tokens_source, decode_tokens=len(dec),
        ttft_ms=pre, ttft_wall_ms=float(prefill_wall_ms) if prefill_wall_ms is not None else pre,
        prefill_ms=pre, decode_ms=dsum,
        prefill_tokens_per_s=1000.0 * prefill_tokens / pre if prefill_tokens and pre > 0 else math.nan,
        decode_tokens_per_s=1000.0 * len(dec) / dsum if dec and dsum > 0 else math.nan,
        p50_ms=p50, p90_ms=p90, p99_ms=p99, drift_ms_per_100=100.0 * slope if slope == slope else math.nan,
        drift_ratio=ratio)

"""Per-run timing signals of an LLM's forward runs, from a timing-only ETDump (no debug buffer).

For each run of the method, in dump order:

- ``time_ms``: its ``Method::execute`` time (else the sum of its operator events);
- ``start_ms``: when it started (the runtime clock, ms; for gaps between runs);
- ``work``: how much bigger the run was than the method's usual run, *robustly*: every operator
  event's time divided by that event's 25th percentile over all runs, and the median of those
  ratios. A prefill of ``n`` tokens makes most kernels work on ``n`` rows, so most ratios rise
  together; the OS preempting a run (a shared phone, a CI machine) stretches a few events by a
  lot, which a median ignores. ``DELEGATE_CALL`` and events timed inside a delegate are left out
  (a delegate's thread pool waits dominate them, and XNNPACK logs whole microseconds);
- ``contrast`` (with an ETRecord): the median slowdown of the *heavy* token-shaped kernels (outputs
  of 64 or more values per token: the MLP's activations, RoPE's cat/slice ...) over that of the
  *light* ones (under 16 values per token, or a fixed shape: views, the position select, the
  last token's norm). A prefill of ``n`` tokens makes the heavy ones work ``n`` times more and
  leaves the light ones as they were; a busy CPU slows both alike, so the contrast stays near 1.
  Which kernels are which is read from the program: the edge graph's output shapes carry the
  tokens dimension as a symbol (``[1, s27, 192]``); NaN without an ETRecord;
- ``attention``: the run's attention (SDPA) time divided by ``work``: decoding attends to every
  cached position, so it grows with the position; a new session (position 0) drops it.

Example::

    from etlens.analysis.llm_phases import forward_signals
    sig = forward_signals(inspector, blocks=[2])
    sig.work[:3], sig.time_ms[:3]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ...schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE, OPERATOR_CALL

__all__ = ["RunSignals", "forward_signals", "signals_from_matrix", "token_weights", "HEAVY", "LIGHT"]

_ATTENTION = ("sdpa", "scaled_dot_product", "attention")
#: output values per token from which a kernel counts as heavy, and under which it counts as light
HEAVY, LIGHT = 64, 16


@dataclass
class RunSignals:
    """Arrays over the method's runs in dump order (see the module docstring); ``refs``: ``(block, column)``
    of each run in the inspector's blocks."""

    time_ms: np.ndarray
    start_ms: np.ndarray
    work: np.ndarray
    attention: np.ndarray
    contrast: np.ndarray
    refs: list[tuple[int, int]]
    run_ids: np.ndarray

    def __len__(self) -> int:
        return len(self.time_ms)


def _p25(matrix: np.ndarray) -> np.ndarray:
    """Each row's 25th percentile (NaN-aware only when needed: ``nanpercentile`` is much slower)."""
    if np.isnan(matrix).any():
        return np.nanpercentile(matrix, 25, axis=1)
    return np.percentile(matrix, 25, axis=1)


def _work(matrix: np.ndarray) -> np.ndarray:
    """Median over events of (time / the event's 25th percentile over runs), per run (NaN-safe)."""
    if matrix.size == 0:
        return np.ones(matrix.shape[1] if matrix.ndim == 2 else 0)
    with np.errstate(all="ignore"):
        base = _p25(matrix)
        ok = np.isfinite(base) & (base > 0)
        if not ok.any():
            return np.ones(matrix.shape[1])
        ratio = matrix[ok] / base[ok, None]
        out = np.nanmedian(ratio, axis=0)
    return np.where(np.isfinite(out), out, 1.0)


def _contrast(ops: np.ndarray, per_token: Optional[np.ndarray]) -> np.ndarray:
    k = ops.shape[1]
    if per_token is None or not len(per_token):
        return np.full(k, np.nan)
    heavy, light = per_token >= HEAVY, (per_token >= 0) & (per_token < LIGHT)
    if heavy.sum() < 4 or light.sum() < 4:
        return np.full(k, np.nan)
    with np.errstate(all="ignore"):
        base = _p25(ops)
        q = ops / np.where(base > 0, base, np.nan)[:, None]
        out = np.nanmedian(q[heavy], axis=0) / np.nanmedian(q[light], axis=0)
    return np.where(np.isfinite(out), out, np.nan)


def signals_from_matrix(time_ms: np.ndarray, start_ms: np.ndarray, ops: np.ndarray,
                        attention_rows: np.ndarray, per_token: Optional[np.ndarray] = None) -> RunSignals:
    """:class:`RunSignals` from a (events x runs) matrix of operator times, the attention rows' mask and,
    optionally, each row's output values per token (-1: unknown, 0: a fixed shape)."""
    work = _work(ops)
    att = np.nansum(ops[attention_rows], axis=0) if attention_rows.any() else np.full(ops.shape[1], np.nan)
    k = len(time_ms)
    return RunSignals(np.asarray(time_ms, float), np.asarray(start_ms, float), work, att / np.maximum(work, 1e-9),
                      _contrast(ops, per_token), [(0, j) for j in range(k)], np.arange(k))


def token_weights(record: Any) -> Optional[dict[int, int]]:
    """``{debug handle: output values per token}`` from the ETRecord's edge graph (0 for a fixed shape), or
    None when the record has no graph etlens can read (then :attr:`RunSignals.contrast` is NaN)."""
    raw = getattr(record, "etlens", None) or record
    hit = _WEIGHTS.get(id(raw))
    if hit is not None and hit[0] is raw:
        return hit[1]
    graph_of = getattr(raw, "graph", None)
    if not callable(graph_of):
        return None
    try:
        g = graph_of(prefer=("edge_dialect_exported_program",))
    except Exception:  # noqa: BLE001 - an unreadable graph only costs the contrast signal
        return None
    out: dict[int, int] = {}
    for node in g:
        per = 0
        for o in node.outputs:
            shape = getattr(o, "shape", ()) or ()
            if any(isinstance(d, str) for d in shape):
                per = max(per, int(np.prod([d for d in shape if isinstance(d, int)] or [1])))
        for h in node.debug_handles:
            out[h] = max(out.get(h, 0), per)
    if len(_WEIGHTS) > 8:
        _WEIGHTS.clear()
    _WEIGHTS[id(raw)] = (raw, out)  # the record is held, so its id is not reused while cached
    return out


#: ``{id(record): (record, weights)}``: a fleet worker labels many dumps of one program
_WEIGHTS: dict[int, tuple[Any, dict[int, int]]] = {}


def forward_signals(inspector: Any, blocks: list[int]) -> RunSignals:
    """The :class:`RunSignals` of the runs in ``blocks`` (one method's blocks), merged in dump order."""
    record = getattr(inspector, "record", None)
    weights = token_weights(record) if record is not None else None
    parts = []
    for bi in blocks:
        b = inspector.block_columns[bi]
        k = b.raw.shape[1]
        exe = next((i for i, n in enumerate(b.names) if n == METHOD_EXECUTE and b.has_perf[i]), None)
        rows = [i for i, n in enumerate(b.names) if b.has_perf[i] and n and n not in FRAMEWORK_EVENT_NAMES
                and n not in (OPERATOR_CALL, DELEGATE_CALL) and not b.is_delegated[i]]
        if not rows:  # a program fully inside a delegate: its delegate calls are all there is
            rows = [i for i, n in enumerate(b.names) if b.has_perf[i] and n == DELEGATE_CALL]
        ops = b.raw[rows] if rows else np.zeros((0, k))
        if exe is not None:
            t = b.raw[exe].astype(float)
            start = b.start[exe].astype(np.float64) / 1e6
        else:
            t = np.nansum(ops, axis=0) if rows else np.zeros(k)
            first = [i for i in range(len(b.names)) if b.has_perf[i]]
            start = b.start[first[0]].astype(np.float64) / 1e6 if first else np.zeros(k)
        att = np.array([any(m in " ".join([b.names[i], *b.op_types[i]]).lower() for m in _ATTENTION) for i in rows],
                       bool)
        per_token = None
        if weights:
            per_token = np.array([max([weights.get(h, -1) for h in _handles(b.debug_handles[i])] or [-1])
                                  for i in rows])
        parts.append((bi, b, t, start, ops, att, per_token))
    # the work baseline is per event, so it is computed per block (blocks of one method share their events
    # only when their structure is the same)
    times, starts, works, atts, cons, refs, ids = [], [], [], [], [], [], []
    for bi, b, t, start, ops, att, per_token in parts:
        s = signals_from_matrix(t, start, ops, att, per_token)
        times.append(s.time_ms)
        starts.append(s.start_ms)
        works.append(s.work)
        atts.append(s.attention)
        cons.append(s.contrast)
        refs += [(bi, j) for j in range(len(t))]
        ids.append(np.asarray(b.runs, np.int64))
    if not parts:
        e = np.zeros(0)
        return RunSignals(e, e, e, e, e, [], np.zeros(0, np.int64))
    run_ids = np.concatenate(ids)
    order = np.argsort(run_ids, kind="stable")
    return RunSignals(np.concatenate(times)[order], np.concatenate(starts)[order], np.concatenate(works)[order],
                      np.concatenate(atts)[order], np.concatenate(cons)[order], [refs[i] for i in order],
                      run_ids[order])


def _handles(h: Any) -> tuple:
    return () if h is None else ((h,) if isinstance(h, int) else tuple(h))

"""Token-level statistics of two LLM builds fed the same tokens: KLD, top-1, top-k, perplexity.

Both builds are run with teacher forcing on one token sequence ``t[0..N-1]``: after ``t[0..i]``
each build gives logits for position ``i`` (its guess at ``t[i+1]``). Per position this module
computes, in float64 whatever the builds' dtype:

* ``kld``: ``KL(P_base || P_new) = sum_v P_base(v) (log P_base(v) - log P_new(v))`` of the two
  next-token distributions (softmax of the logits), in nats, as llama.cpp's ``--kl-divergence``
  does (the base is the reference, the new build is the one judged);
* ``top1_base`` / ``top1_new`` / ``top1_same``: the argmax of each and whether they agree;
* ``topk_overlap``: ``|topk(base) & topk(new)| / k``;
* ``logp_base`` / ``logp_new``: the log-probability each gives the actual next token ``t[i+1]``
  (``None`` at the last position, which has no next token): the terms of the perplexities;
* ``new_logp_of_base_top1``: how likely the new build finds the base's top choice.

:func:`summarize` adds the numbers llama.cpp users know: KLD mean / median / p90 / p99 / max,
same-top-token share, each build's perplexity over the sequence and their ratio, and the first
top-1 disagreement (the first position where the two builds, fed the same prefix, would pick
different tokens; where free-running decoding parts is measured by running it: ``--generate``).

Example::

    import numpy as np
    from etlens.analysis.llm_diff.metrics import position_stats, summarize
    rows = position_stats(base_logits, new_logits, tokens)      # [N, V] arrays, N token ids
    s = summarize(rows)
    s["kld_mean"], s["top1_agreement"], s["ppl_ratio"]
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["log_softmax", "kl_divergence", "position_stats", "summarize", "DEFAULT_TOPK"]

#: the k of the top-k overlap column
DEFAULT_TOPK = 5


def log_softmax(logits: Any) -> np.ndarray:
    """Row-wise log-softmax in float64 (stable: the row maximum is subtracted first)."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def kl_divergence(base_logits: Any, new_logits: Any) -> np.ndarray:
    """``KL(softmax(base) || softmax(new))`` per row, in nats (never negative: rounding is clipped at 0).

    >>> float(kl_divergence([[0.0, 0.0]], [[0.0, 0.0]])[0])
    0.0
    """
    lp, lq = log_softmax(base_logits), log_softmax(new_logits)
    p = np.exp(lp)
    kld = (p * (lp - lq)).sum(axis=-1)
    return np.maximum(kld, 0.0)


def _topk(lp: np.ndarray, k: int) -> np.ndarray:
    k = min(k, lp.shape[-1])
    return np.argpartition(-lp, k - 1, axis=-1)[:, :k]


def position_stats(base_logits: Any, new_logits: Any, tokens: Sequence[int], k: int = DEFAULT_TOPK) -> list[dict]:
    """One dict per position (see the module docstring for the fields).

    ``base_logits`` / ``new_logits``: ``[N, V]`` (the same ``N`` and ``V``); ``tokens``: the ``N``
    token ids fed (position ``i``'s next token is ``tokens[i + 1]``).
    """
    a = np.asarray(base_logits, dtype=np.float64)
    b = np.asarray(new_logits, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"logits must be two [positions, vocab] arrays of one shape, got {a.shape} and {b.shape}")
    n = a.shape[0]
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} tokens for {n} positions of logits")
    lp, lq = log_softmax(a), log_softmax(b)
    kld = np.maximum((np.exp(lp) * (lp - lq)).sum(axis=-1), 0.0)
    t1a, t1b = lp.argmax(-1), lq.argmax(-1)
    ka, kb = _topk(lp, k), _topk(lq, k)
    kk = ka.shape[1]
    rows = []
    for i in range(n):
        nxt = int(tokens[i + 1]) if i + 1 < n else None
        rows.append({
            "position": i, "token": int(tokens[i]), "next_token": nxt, "kld": float(kld[i]),
            "top1_base": int(t1a[i]), "top1_new": int(t1b[i]), "top1_same": bool(t1a[i] == t1b[i]),
            "topk_overlap": len(set(ka[i].tolist()) & set(kb[i].tolist())) / kk,
            "logp_base": None if nxt is None else float(lp[i, nxt]),
            "logp_new": None if nxt is None else float(lq[i, nxt]),
            "new_logp_of_base_top1": float(lq[i, t1a[i]]),
        })
    return rows


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else math.nan


def summarize(rows: list[dict]) -> dict[str, Any]:
    """llama.cpp-style summary of :func:`position_stats` rows.

    ``kld_mean/median/p90/p99/max``, ``top1_agreement`` (0..1) and ``same_top_pct`` (the same in
    %), ``topk_overlap_mean``, ``ppl_base`` / ``ppl_new`` (``exp`` of the mean negative
    log-probability of the actual next tokens) and ``ppl_ratio`` (new / base),
    ``first_top1_mismatch`` (position, or ``None``: the first prefix after which the top-1 tokens differ).
    """
    kld = np.array([r["kld"] for r in rows], dtype=np.float64)
    same = np.array([r["top1_same"] for r in rows], dtype=bool)
    la = np.array([r["logp_base"] for r in rows if r["logp_base"] is not None], dtype=np.float64)
    lb = np.array([r["logp_new"] for r in rows if r["logp_new"] is not None], dtype=np.float64)
    ppl_a = float(math.exp(-la.mean())) if la.size else None
    ppl_b = float(math.exp(-lb.mean())) if lb.size else None
    mismatch: Optional[int] = next((r["position"] for r in rows if not r["top1_same"]), None)
    return {
        "positions": len(rows),
        "kld_mean": float(kld.mean()) if kld.size else math.nan,
        "kld_median": _pct(kld, 50), "kld_p90": _pct(kld, 90), "kld_p99": _pct(kld, 99),
        "kld_max": float(kld.max()) if kld.size else math.nan,
        "top1_agreement": float(same.mean()) if same.size else math.nan,
        "same_top_pct": 100.0 * float(same.mean()) if same.size else math.nan,
        "topk_overlap_mean": float(np.mean([r["topk_overlap"] for r in rows])) if rows else math.nan,
        "ppl_base": ppl_a, "ppl_new": ppl_b,
        "ppl_ratio": (ppl_b / ppl_a) if ppl_a and ppl_b else None,
        "first_top1_mismatch": mismatch,
    }

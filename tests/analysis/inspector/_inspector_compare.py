"""Cell-by-cell comparison of an etlens and an ExecuTorch Inspector DataFrame / Event."""

from __future__ import annotations

import math

import numpy as np


def same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a.keys()) == list(b.keys()) and all(same(a[k], b[k]) for k in a)
    na = a is None or (isinstance(a, float) and math.isnan(a))
    nb = b is None or (isinstance(b, float) and math.isnan(b))
    if na or nb:
        return na and nb
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        return float(a) == float(b)
    return type(a) is type(b) and a == b or (isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer))
                                             and int(a) == int(b))


def frame_diffs(expected, got, limit: int = 10) -> list[str]:
    """Human-readable differences (empty = equal): columns, dtypes, length, then cells."""
    out = []
    if list(expected.columns) != list(got.columns):
        return [f"columns differ: {list(expected.columns)} != {list(got.columns)}"]
    for c in expected.columns:
        if expected[c].dtype != got[c].dtype:
            out.append(f"dtype of {c}: {expected[c].dtype} != {got[c].dtype}")
    if len(expected) != len(got):
        return out + [f"rows: {len(expected)} != {len(got)}"]
    for i in range(len(expected)):
        for c in expected.columns:
            if not same(expected.at[i, c], got.at[i, c]):
                out.append(f"row {i} {c}: {expected.at[i, c]!r:.200} != {got.at[i, c]!r:.200}")
                if len(out) >= limit:
                    return out
    return out

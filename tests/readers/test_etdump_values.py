"""The batched debug-value decoder (``readers.etdump_values``) against ``ETDump.debug_value`` one by one.

On real dumps (every run, every debug event), with every scalar type a debug buffer can hold (the
dtype column of a real run rewritten in memory: itemsize, bounds and dtype views all change), with a
truncated buffer, with corrupt shapes, and without a buffer: each entry is exactly what
``debug_value`` gives, or ``None`` where it raises ``FormatError``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.conftest import requires_executorch

from etlens.errors import FormatError
from etlens.readers.etdump import SCALAR_TYPES, DebugBuffer, read_etdump
from etlens.readers.etdump_values import debug_values


def _one_by_one(dump, run, idxs, buf) -> list:
    out = []
    for i in idxs:
        try:
            out.append(dump.debug_value(run, int(i), buf))
        except FormatError:
            out.append(None)
    return out


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
                and a.shape == b.shape and a.untyped_storage().nbytes() == b.untyped_storage().nbytes()
                and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _check_all_runs(dump, buf) -> int:
    checked = 0
    for r, run in enumerate(dump.runs):
        idxs = run.debug_indices()
        if not len(idxs):
            continue
        # shuffled and repeated indices too: the result follows the order asked for
        order = np.concatenate([idxs, idxs[::-1][: len(idxs) // 2]])
        got, want = debug_values(dump, r, order, buf), _one_by_one(dump, r, order, buf)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert _same(g, w), f"run {r} event {int(order[k])}: {g!r:.80} vs {w!r:.80}"
        checked += len(order)
    return checked


def test_real_dump_same_as_one_by_one(committed):
    art = committed["mlp_portable"]
    dump = read_etdump(art.etdump)
    assert _check_all_runs(dump, DebugBuffer(art.debug_buffer)) > 0
    assert _check_all_runs(dump, None) > 0  # no buffer: zeros of the logged shape, one by one


@requires_executorch
@pytest.mark.parametrize("case", ["mlp_xnnpack", "cnn_q8_xnnpack", "mixed_xnnpack", "transformer_portable"])
def test_built_dumps_same_as_one_by_one(artifacts, case):
    art = artifacts[case]
    assert _check_all_runs(read_etdump(art.etdump), DebugBuffer(art.debug_buffer)) > 0


@pytest.mark.parametrize("code", sorted(SCALAR_TYPES))
def test_every_scalar_type_same_as_one_by_one(committed, code):
    art = committed["mlp_portable"]
    dump = read_etdump(art.etdump)
    run = dump.runs[1]
    dump.runs[1] = dataclasses.replace(run, scalar_type=np.full_like(run.scalar_type, code))
    # wider types run past the end of the buffer for the last tensors: None in both
    assert _check_all_runs(dump, DebugBuffer(art.debug_buffer)) > 0


def test_truncated_buffer_and_corrupt_shapes(committed):
    art = committed["mlp_portable"]
    data = open(art.debug_buffer, "rb").read()
    dump = read_etdump(art.etdump)
    offs = sorted(dump.runs[1].tensor_offset[dump.runs[1].debug_indices()].tolist())
    short = DebugBuffer(data=data[: offs[len(offs) // 2] + 4])  # half the tensors lie past its end
    _check_all_runs(dump, short)
    vals = debug_values(dump, 1, dump.runs[1].debug_indices(), short)
    assert any(v is None for v in vals) and any(v is not None for v in vals)
    run = dump.runs[1]
    # shapes read from elsewhere in the file (negative, huge or zero dims), and offsets out of range
    rng = np.random.default_rng(0)
    sizes_pos = run.sizes_pos + rng.integers(-64, 64, size=len(run)) * 8
    offsets = np.where(rng.random(len(run)) < 0.3, -rng.integers(1, 1 << 20, size=len(run)), run.tensor_offset)
    end = len(open(art.etdump, "rb").read()) - 8 * int(run.ndim.max())  # still inside the file
    dump.runs[1] = dataclasses.replace(run, sizes_pos=np.clip(sizes_pos, 0, end), tensor_offset=offsets)
    _check_all_runs(dump, DebugBuffer(data=data))
    vals = debug_values(dump, 1, dump.runs[1].debug_indices(), DebugBuffer(data=data))
    assert any(v is None for v in vals) and any(v is not None for v in vals)

"""Decode many debug events of an ETDump at once: shapes, bounds and tensors from numpy columns.

:meth:`ETDump.debug_value <etlens.readers.etdump.ETDump.debug_value>` decodes one event: a handful
of numpy scalar reads, a shape read, a bounds check and the tensor. Comparing a 1000-layer program
decodes 2000 of them, and that per-event work (not the tensors) was most of the time.
:func:`debug_values` does the same for a whole list of events of one run: the plain-tensor events
(by far the usual kind) have their shapes gathered with one vectorised read, their element counts
and buffer bounds checked as arrays, and only the tensor itself is made per event (a zero-copy
view of the memory-mapped debug buffer, storage exactly its own bytes, as ``debug_value`` makes).
Everything else — tensor lists, scalars, tensors without a buffer, anything unusual or out of
bounds — goes through ``debug_value`` one by one, so every entry is exactly what ``debug_value``
gives (or ``None`` where it raises :class:`~etlens.errors.FormatError`).

Example::

    from etlens.readers.etdump import read_etdump, DebugBuffer
    from etlens.readers.etdump_values import debug_values
    dump, buf = read_etdump("run.etdp"), DebugBuffer("run.debug.bin")
    run = dump.runs[1]
    values = debug_values(dump, 1, run.debug_indices(), buf)   # [torch.Tensor, ...]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import FormatError
from .etdump import SCALAR_TYPES, V_TENSOR, DebugBuffer, ETDump

__all__ = ["debug_values"]

#: largest element count taken on the vectorised path (anything bigger is checked one by one)
_MAX_FAST_COUNT = float(1 << 39)


def _one(dump: ETDump, run: int, i: int, buffer: DebugBuffer | None) -> Any:
    try:
        return dump.debug_value(run, i, buffer)
    except FormatError:
        return None


def debug_values(dump: ETDump, run: int, idxs: Any, buffer: DebugBuffer | None) -> list[Any]:
    """``[debug_value(run, i, buffer) for i in idxs]``, with ``None`` where that raises ``FormatError``.

    The plain-tensor events are decoded together (see the module docstring); the result is the
    same, entry for entry.
    """
    idx = np.asarray(idxs, dtype=np.int64).ravel()
    n = idx.size
    out: list[Any] = [None] * n
    if n == 0:
        return out
    r = dump.runs[run]
    if buffer is None or int(idx.min()) < 0 or int(idx.max()) >= len(r.kind):
        return [_one(dump, run, int(i), buffer) for i in idx.tolist()]
    fast = (r.value_type[idx] == V_TENSOR) & (r.tensor_pos[idx] != 0) & (r.value_pos[idx] != 0)
    st = r.scalar_type[idx].astype(np.int64)
    known = np.array(sorted(SCALAR_TYPES), dtype=np.int64)
    fast &= np.isin(st, known)
    nd = r.ndim[idx].astype(np.int64)
    pos = np.flatnonzero(fast)
    if pos.size:
        ndf = nd[pos]
        width = int(ndf.max())
        sizes = np.ones((pos.size, max(width, 1)), dtype=np.int64)
        if width:
            cols = np.arange(width, dtype=np.int64)
            mask = cols[None, :] < ndf[:, None]
            at = np.where(mask, r.sizes_pos[idx[pos]][:, None] + 8 * cols, 0)
            try:
                vals = dump.read_i64(at.ravel(), "Tensor.sizes").reshape(at.shape)
            except FormatError:  # some shape lies outside the file: let each event say so
                return [_one(dump, run, int(i), buffer) for i in idx.tolist()]
            sizes[:, :width] = np.where(mask, vals, 1)
        # negative or absurd dims (a corrupt dump) take the one-by-one path, which reports them; the
        # float product only sorts events (anything near the limit goes one by one, exactly checked)
        sane = (sizes >= 0).all(axis=1) & (np.prod(sizes.astype(np.float64), axis=1) <= _MAX_FAST_COUNT)
        count = np.prod(np.where(sane[:, None], sizes, 0), axis=1)
        item = np.zeros(pos.size, dtype=np.int64)
        for code in np.unique(st[pos]).tolist():
            item[st[pos] == code] = SCALAR_TYPES[code].itemsize
        offset = r.tensor_offset[idx[pos]].astype(np.int64)
        end = offset + count * item
        ok = sane & (count > 0) & (offset >= 0) & (end <= buffer.size)  # empty tensors: one by one (zeros)
        fast[pos[~ok]] = False
        good = pos[ok]
        if good.size:
            shapes = sizes[ok].tolist()
            ndl = ndf[ok].tolist()
            offs = offset[ok].tolist()
            nbytes = (count * item)[ok].tolist()
            codes = st[good].tolist()
            for j, k in enumerate(good.tolist()):
                out[k] = buffer.tensor_from(codes[j], tuple(shapes[j][:ndl[j]]), offs[j], nbytes[j])
    for k in np.flatnonzero(~fast).tolist():
        out[k] = _one(dump, run, int(idx[k]), buffer)
    return out

"""The ETDump reader's shortcuts give exactly what the general code gives.

``_unique`` (few distinct values, one pass each) must return ``np.unique``'s arrays; ``FB.intern``
must intern strings wherever they sit (unaligned, in the buffer's last bytes); the inspector's
packed-row ``_unique_rows`` must group rows as the byte-wise ``np.unique`` does.
"""

from __future__ import annotations

import numpy as np
import pytest

from etlens.analysis.inspector.build import _packed_rows, _unique_rows
from etlens.readers._flatbuffers.columns import FB, _np_unique, _unique


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
@pytest.mark.parametrize("distinct", [1, 2, 7, 16, 17, 300])
@pytest.mark.parametrize("n", [1, 5, 2000])
def test_unique_matches_numpy(dtype, distinct, n):
    rng = np.random.default_rng(distinct * 1000 + n)
    v = (rng.integers(0, distinct, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)).astype(dtype)
    got, want = _unique(v), _np_unique(v)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _buffer_with_strings(words: list[bytes], pad: int) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Strings back to back from byte ``pad`` on (so unaligned when ``pad`` is odd), the last one
    ending exactly at the end of the buffer."""
    data, starts, lens = bytearray(b"\xAA" * pad), [], []
    for w in words:
        starts.append(len(data))
        lens.append(len(w))
        data += w
    return bytes(data), np.array(starts, dtype=np.int64), np.array(lens, dtype=np.int64)


@pytest.mark.parametrize("pad", [0, 3, 4, 64])
def test_intern_anywhere_in_the_buffer(pad):
    words = [b"native_call_addmm.out", b"OPERATOR_CALL", b"", b"x", b"native_call_addmm.out",
             b"OPERATOR_CALL", b"x" * 40, b"DELEGATE_CALL"]
    data, st, ln = _buffer_with_strings(words, pad)
    fb = FB(data)
    table: dict[bytes, int] = {}
    names: list[str] = []
    ids = fb.intern(st, ln, table, names)
    assert [names[i] for i in ids.tolist()] == [w.decode() for w in words]
    assert len(names) == len(set(words))


def test_intern_absent_strings():
    data, st, ln = _buffer_with_strings([b"abc", b"abc"], 8)
    ln = np.array([3, -1])
    names: list[str] = []
    ids = FB(data).intern(st, ln, {}, names)
    assert ids.tolist() == [0, -1] and names == ["abc"]


def _void_groups(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.ascontiguousarray(m).view(f"V{8 * m.shape[1]}").ravel()
    _, first, inv = np.unique(v, return_index=True, return_inverse=True)
    return first, inv.ravel()


@pytest.mark.parametrize("seed", range(5))
def test_unique_rows_groups_like_bytes(seed):
    rng = np.random.default_rng(seed)
    m = np.stack([rng.integers(-1, 40, 3000), rng.integers(0, 3, 3000), np.full(3000, -1),
                  rng.integers(-1, 8, 3000)], axis=1).astype(np.int64)
    first, inv, last = _unique_rows(m)
    want_first, want_inv = _void_groups(m)
    assert sorted(first.tolist()) == sorted(want_first.tolist())
    # same partition of the rows, whatever the group numbering
    np.testing.assert_array_equal(first[inv], want_first[want_inv])
    for g in range(len(first)):
        rows = np.flatnonzero(inv == g)
        assert first[g] == rows[0] and last[g] == rows[-1]


def test_packed_rows_refuses_wide_ranges():
    m = np.array([[-(2 ** 63), 5], [2 ** 63 - 1, 5]], dtype=np.int64)
    assert _packed_rows(m) is None
    first, inv, last = _unique_rows(m)
    assert first.tolist() == [0, 1] or first.tolist() == [1, 0]
    assert _packed_rows(np.zeros((0, 3), np.int64)) is None


def test_intern_buffer_shorter_than_a_row():
    data, st, ln = _buffer_with_strings([b"abcdefghij", b"ab"], 0)
    names: list[str] = []
    ids = FB(data).intern(st, ln, {}, names)
    assert [names[i] for i in ids.tolist()] == ["abcdefghij", "ab"]

"""The fleet's ETDump profile-column reader against the general reader, on hand-built and real dumps."""

from __future__ import annotations

import random

import numpy as np
import pytest

from etlens.errors import EtlensError, FormatError, TruncatedFileError
from etlens.readers._flatbuffers.columns import FB
from etlens.readers.etdump import PROFILE, read_etdump
from etlens.readers.etdump_columns import DumpColumns, read_profile_columns, string_masks, string_words
from tests.readers.etdump_synth import build, many_runs


def _same_as_general(data: bytes) -> None:
    cols = read_profile_columns(data)
    dump = read_etdump(data)
    assert cols is not None and len(cols.run_names) == len(dump.runs)
    for r, run in enumerate(dump.runs):
        m = run.kind == PROFILE
        sl = slice(int(cols.bounds[r]), int(cols.bounds[r + 1]))
        assert cols.run_names[r] == run.name and cols.bundled[r] == run.bundled_input_index
        for mine, theirs in ((cols.instruction_id, run.instruction_id), (cols.chain_index, run.chain_index),
                             (cols.delegate_id_int, run.delegate_id_int), (cols.start_time, run.start_time),
                             (cols.end_time, run.end_time)):
            assert np.array_equal(mine[sl], theirs[m])
        names = [None if n < 0 else bytes(cols.fb.buf[s:s + n]).decode()
                 for s, n in zip(cols.name_start[sl].tolist(), cols.name_len[sl].tolist())]
        assert names == [dump.string(int(i)) for i in run.name_id[m]]
        dstr = [None if n < 0 else bytes(cols.fb.buf[s:s + n]).decode()
                for s, n in zip(cols.dstr_start[sl].tolist(), cols.dstr_len[sl].tolist())]
        assert dstr == [dump.string(int(i)) for i in run.delegate_id_str[m]]


def test_columns_equal_the_general_reader():
    _same_as_general(many_runs())
    _same_as_general(many_runs(runs=3, ops=9, seed=4, allocations=False))
    _same_as_general(build([]))


def test_patterns_split_exactly_where_runs_differ():
    cols = read_profile_columns(many_runs())
    pattern, templates, sigs = cols.patterns()
    assert templates == [0, 1, 8, 10, 26] and len(sigs) == len(set(sigs)) == 5
    assert pattern[8] == 2                          # one byte of one kernel name differs
    assert pattern[10] == pattern[32] == 3          # the same duplicated event in two runs
    assert pattern[26] == 4                         # another bundled input
    assert pattern[22] == -1                        # no events
    assert pattern[12] == pattern[14] == 1          # allocations / a wrapping counter: timestamps aside, the same
    again = read_profile_columns(many_runs(seed=9)).patterns()   # other timestamps: the same signatures
    assert again[2] == sigs and np.array_equal(again[0], pattern)


def test_dumps_with_debug_events_need_the_general_reader(committed):
    data = many_runs(debug=True)
    assert read_profile_columns(data) is None
    assert read_profile_columns(committed["mlp_portable"].etdump) is None
    general = DumpColumns.of(read_etdump(data))
    pattern, templates, _ = general.patterns()
    assert templates == [0, 1, 8, 10, 12, 18, 26] and pattern[22] == -1


def test_string_words_compare_bytes_only_up_to_each_length():
    data = b"\x00" * 4 + b"abcdXXXX" + b"abcdYYYY" + b"abcdefgh" + b"abc\x00ZZZZ"
    fb = FB(data)
    starts = np.array([4, 12, 20, 28], np.int64)
    w = string_words(fb, starts, np.array([4, 4, 4, 3], np.int64))
    assert (w[0] == w[1]).all() and (w[0] == w[2]).all() and not (w[0] == w[3]).all()
    raw = string_words(fb, starts, np.array([5, 5, 5, 5], np.int64), masked=False)
    masks = string_masks(np.array([5, 5, 5, 5], np.int64), raw.shape[1])
    assert ((raw[0] ^ raw[1]) & masks[0]).any()          # "abcdX" != "abcdY"
    odd = FB(b"\x00abcdefgh")                             # unaligned strings are read byte by byte
    assert (string_words(odd, np.array([1], np.int64), np.array([8], np.int64)).view("S8") == b"abcdefgh").all()


def test_bad_files_raise_one_clear_error(tmp_path):
    with pytest.raises(FormatError, match="not an ETDump"):
        read_profile_columns(b"\x10\x00\x00\x00not an etdump at all")
    data = many_runs(runs=4, ops=6)
    with pytest.raises(TruncatedFileError):
        read_profile_columns(data[:200])
    rng = random.Random(1)
    for _ in range(300):               # flipped bytes: read or refuse with an EtlensError, nothing else
        bad = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(8, len(bad))] = rng.randrange(256)
        try:
            cols = read_profile_columns(bytes(bad))
            if cols is not None:
                cols.patterns()
        except EtlensError:
            pass

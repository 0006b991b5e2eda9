"""The generic FlatBuffer accessor on a hand-built buffer (layout written out byte by byte).

Layout (little-endian)::

    0   u32 root offset -> 24          4  identifier "TEST"
    8   vtable: vlen 14, tlen 24, field offsets 4, 8, 12, 16, 20
    24  table: soffset 16 (vtable at 24 - 16 = 8)
    28  f0 u32 = 42
    32  f1 -> string "hello" at 48
    36  f2 -> [u16] 1, 2, 3 at 60
    40  f3 -> [string] "a", "bc" at 72
    44  f4 struct (u16 7, u16 9)
"""

from __future__ import annotations

import struct

import pytest

from etlens.errors import FormatError, TruncatedFileError
from etlens.readers._flatbuffers import FlatBuffer, field_path, render_path


def _buffer() -> bytes:
    b = bytearray(100)
    struct.pack_into("<I4s", b, 0, 24, b"TEST")
    struct.pack_into("<7H", b, 8, 14, 24, 4, 8, 12, 16, 20)
    struct.pack_into("<iIIIIHH", b, 24, 16, 42, 48 - 32, 60 - 36, 72 - 40, 7, 9)
    struct.pack_into("<I6s", b, 48, 5, b"hello\0")
    struct.pack_into("<I3H", b, 60, 3, 1, 2, 3)
    struct.pack_into("<III", b, 72, 2, 84 - 76, 92 - 80)
    struct.pack_into("<I2s", b, 84, 1, b"a\0")
    struct.pack_into("<I3s", b, 92, 2, b"bc\0")
    return bytes(b)


def test_accessors():
    fb = FlatBuffer(_buffer(), "t.bin", identifier=b"TEST")
    t = fb.root("root")
    assert t.u32(0) == 42 and t.i32(0) == 42 and t.scalar(0, "I") == 42
    assert t.string(1) == "hello"
    assert t.scalars(2, "H") == (1, 2, 3) and t.vector_len(2) == 3
    assert t.strings(3) == ["a", "bc"]
    assert t.struct(4, "<HH") == (7, 9)
    # absent fields take the default
    assert t.u32(9, 5) == 5 and t.string(9) is None and t.table(9) is None and t.scalars(9, "i") == ()
    assert t.union(9) == (0, None) and t.tables(9) == [] and bytes(t.bytes(9)) == b""


def test_shared_vtable_declaring_a_smaller_table_still_reads():
    # The Python flatbuffers builder shares a vtable among tables whose field offsets match, whatever
    # their inline sizes; a table may then hold fields past the size its vtable declares.
    b = bytearray(_buffer())
    struct.pack_into("<H", b, 10, 8)  # the vtable declares 8 inline bytes; f4 lies at bytes 20..24
    t = FlatBuffer(bytes(b), "t.bin").root()
    assert t.struct(4, "<HH") == (7, 9) and t.string(1) == "hello" and t.tlen == 8


def test_size_prefixed(committed):
    data = open(committed["mlp_portable"].etdump, "rb").read()
    fb = FlatBuffer(data, "run.etdp", size_prefixed=True, identifier=b"ED00", what="ETDump")
    root = fb.root("etdump")
    assert fb.start == 4 and fb.end == 4 + struct.unpack_from("<I", data, 0)[0]
    assert root.offs and root.tables(1)  # ETDump.run_data: one entry per run
    with pytest.raises(TruncatedFileError, match="declares .* bytes after its size prefix"):
        FlatBuffer(data[:100], "run.etdp", size_prefixed=True)


def test_errors_name_field_and_offset():
    b = bytearray(_buffer())
    struct.pack_into("<I", b, 32, 10_000)  # f1 string offset far outside
    t = FlatBuffer(bytes(b), "t.bin").root("root")
    with pytest.raises(TruncatedFileError, match=r"t.bin: FlatBuffer \(field root.name\): string offset .* at byte"):
        t.string(1, name="name")
    b = bytearray(_buffer())
    struct.pack_into("<I", b, 72, 1 << 30)  # string vector count larger than the buffer
    with pytest.raises(TruncatedFileError, match=r"declares 1073741824 elements"):
        FlatBuffer(bytes(b), "t.bin").root().strings(3)
    b = bytearray(_buffer())
    struct.pack_into("<H", b, 8, 3)  # odd vtable size
    with pytest.raises(FormatError, match="bad size 3"):
        FlatBuffer(bytes(b), "t.bin").root()
    b = bytearray(_buffer())
    struct.pack_into("<H", b, 8 + 4 + 2 * 4, 74)  # f4 (4-byte struct) starting 2 bytes before the buffer ends
    with pytest.raises(FormatError, match="outside the buffer"):
        FlatBuffer(bytes(b), "t.bin").root().struct(4, "<HH")
    with pytest.raises(FormatError, match=r"not a FlatBuffer \(identifier b'TEST'"):
        FlatBuffer(_buffer(), "t.bin", identifier=b"XXXX")
    with pytest.raises(TruncatedFileError, match="too short"):
        FlatBuffer(b"\0" * 5, "t.bin")


def test_paths_render_lazily():
    p = field_path(field_path(field_path("program", "execution_plan", 0), "chains", 1), "instructions", 3)
    assert render_path(p) == "program.execution_plan[0].chains[1].instructions[3]"
    assert render_path(None) == ""

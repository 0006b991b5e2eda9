"""Damaged ``.pte`` files: always an ``EtlensError`` naming the file and the field or offset.

Truncation at every offset, bit flips, offsets and counts pointing outside the file, wrong
identifiers and wrong file types must never surface as ``IndexError``/``struct.error``, hang, or
allocate by a declared count larger than the file.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from etlens.errors import EtlensError, FormatError, TruncatedFileError
from etlens.readers._flatbuffers import FlatBuffer
from etlens.readers.pte import read, read_pte_bytes
from etlens.backends.xnnpack.payload import decode_xnnpack


@pytest.fixture(scope="module")
def portable(committed) -> bytes:
    return open(committed["mlp_portable"].pte, "rb").read()


@pytest.fixture(scope="module")
def xnn(committed) -> bytes:
    return open(committed["mlp_xnnpack"].pte, "rb").read()


def _parse_all(data: bytes, name: str = "bad.pte") -> None:
    art = read_pte_bytes(data, name=name)
    art.summary()
    for g in art.graphs().values():
        g.lint()


def test_truncated_at_every_offset(portable, xnn):
    for data in (portable, xnn):
        for n in range(0, len(data), 7):
            with pytest.raises(EtlensError, match="bad.pte"):
                _parse_all(data[:n])


def test_truncated_messages_name_what_to_do(portable):
    with pytest.raises(TruncatedFileError, match=r"bad.pte: 5 bytes is too short.*re-export"):
        _parse_all(portable[:5])
    with pytest.raises(TruncatedFileError, match=r"extended header .* program is \d+ bytes but the file has 100"):
        _parse_all(portable[:100])
    # cut inside the segment data: the header declares more segment bytes than remain
    with pytest.raises(TruncatedFileError, match=r"segment data .* file ends at byte"):
        _parse_all(portable[:-10])


def test_wrong_identifier_and_wrong_type(portable, tmp_path):
    bad = bytearray(portable)
    bad[4:8] = b"ED00"
    with pytest.raises(FormatError, match=r"not an ExecuTorch program .*ED00.*bytes 4-8"):
        read_pte_bytes(bytes(bad), name="bad.pte")
    bad[4:8] = b"ET11"
    with pytest.raises(FormatError, match="ET11 is not supported"):
        read_pte_bytes(bytes(bad), name="bad.pte")
    zipfile = tmp_path / "model.pte"
    zipfile.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(FormatError, match="model.pte: not an ExecuTorch program"):
        read(zipfile)


def test_offset_outside_file_names_field(portable):
    # Point Program.execution_plan (root field 1) far past the end of the file.
    root = struct.unpack_from("<I", portable, 0)[0]
    vt = root - struct.unpack_from("<i", portable, root)[0]
    field = struct.unpack_from("<H", portable, vt + 4 + 2 * 1)[0]
    bad = bytearray(portable)
    struct.pack_into("<I", bad, root + field, 10_000_000)
    with pytest.raises(TruncatedFileError, match=r"field program\.execution_plan\).*outside the buffer at byte"):
        read_pte_bytes(bytes(bad), name="bad.pte")


def test_huge_count_does_not_allocate(portable):
    # Make the values vector of plan 0 claim 2**31 entries: refused before any allocation.
    art = read_pte_bytes(portable, name="ok.pte")
    fb = FlatBuffer(portable, "ok.pte", end=art.program.extended_header.program_size)
    plan = fb.root("program").tables(1)[0]
    start, n = plan.vector(2, 4)
    bad = bytearray(portable)
    struct.pack_into("<I", bad, start - 4, 1 << 31)
    with pytest.raises(TruncatedFileError, match=r"values\).*declares 2147483648 elements"):
        read_pte_bytes(bytes(bad), name="bad.pte")


def test_segment_outside_file(xnn):
    # Cut the file inside the delegate segment: the segment table now points past the end.
    art = read_pte_bytes(xnn, name="ok.pte")
    d = art.program.execution_plan[0].delegates[0]
    with pytest.raises(TruncatedFileError, match=r"bad.pte"):
        read_pte_bytes(xnn[:d.payload_offset + 10], name="bad.pte")


def test_damaged_xnnpack_payload_is_reported_not_fatal(xnn):
    art = read_pte_bytes(xnn, name="ok.pte")
    d = art.program.execution_plan[0].delegates[0]
    bad = bytearray(xnn)
    bad[d.payload_offset + 4:d.payload_offset + 8] = b"ZZZZ"
    art2 = read_pte_bytes(bytes(bad), name="bad.pte")
    d2 = art2.program.execution_plan[0].delegates[0]
    assert d2.decoded is None and "not an XNNPACK payload" in d2.decode_error
    assert d2.payload_size == d.payload_size
    summary = art2.summary()
    assert "decode_error" in summary["methods"][0]["delegates"][0]
    with pytest.raises(FormatError, match="payload"):
        decode_xnnpack(b"\0\0\0\0XH00" + b"\xff" * 30, name="payload")
    with pytest.raises(FormatError, match="only 3 bytes"):
        decode_xnnpack(b"abc", name="payload")


def test_cli_prints_one_line(portable, tmp_path, capsys):
    from etlens.cli.main import main

    p = tmp_path / "cut.pte"
    p.write_bytes(portable[:300])
    assert main(["info", str(p)]) == 1
    captured = capsys.readouterr()
    assert "cut.pte" in captured.err + captured.out
    assert "Traceback" not in captured.err


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutations_never_raise_raw_errors(portable, xnn, data):
    src = data.draw(st.sampled_from([portable, xnn]))
    buf = bytearray(src)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        kind = data.draw(st.sampled_from(["flip", "byte", "word", "cut"]))
        if kind == "flip":
            buf[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "byte":
            buf[pos] = data.draw(st.integers(0, 255))
        elif kind == "word" and pos + 4 <= len(buf):
            buf[pos:pos + 4] = data.draw(st.binary(min_size=4, max_size=4))
        elif kind == "cut":
            del buf[pos:]
            if not buf:
                break
    try:
        _parse_all(bytes(buf))
    except EtlensError as exc:
        assert "bad.pte" in str(exc)


def test_reader_never_hangs_on_garbage():
    # Random bytes with a valid-looking identifier, run in a subprocess with a hard timeout.
    code = textwrap.dedent("""
        import random
        from etlens.errors import EtlensError
        from etlens.readers.pte import read_pte_bytes
        rnd = random.Random(7)
        for i in range(300):
            data = bytearray(rnd.randbytes(rnd.randint(8, 4000)))
            data[4:8] = b"ET12"
            try:
                read_pte_bytes(bytes(data), name="g.pte").summary()
            except EtlensError:
                pass
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok"


def test_tensor_lists_containing_each_other_do_not_recurse(portable):
    from etlens.readers._pte_graph import plan_graph
    from etlens.readers._pte_model import Value

    art = read_pte_bytes(portable, name="x.pte")
    plan = art.program.execution_plan[0]
    n = len(plan.values)
    plan.values += [Value("tensor_list", (n + 1,)), Value("tensor_list", (n,))]
    plan.outputs = plan.outputs + (n,)
    plan.chains[0].instructions[0].args = plan.chains[0].instructions[0].args + (n + 1,)
    g = plan_graph(art.program, plan).lint()
    assert g.nodes[-1].kind == "output"

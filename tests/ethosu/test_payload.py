"""The Ethos-U delegate payload (Vela bin stream) read without ExecuTorch, against Vela's own numbers."""

from __future__ import annotations

import struct

import pytest

from etlens.errors import FormatError, TruncatedFileError
from etlens.backends.ethosu.payload import decode_ethosu
from etlens.readers.pte import read
from etlens.backends.ethosu.vela import read_sidecar


def _payload(pte: str) -> bytes:
    art = read(pte)
    (d,) = [d for p in art.program.execution_plan for d in p.delegates]
    with open(pte, "rb") as f:
        data = f.read()
    return data[d.payload_offset:d.payload_offset + d.payload_size]


def test_payload_matches_vela_summary(ethosu_small):
    """SRAM (scratch) and flash (weights) from the .pte equal what Vela printed for the same compile."""
    for case in ethosu_small.values():
        art = read(case.pte)
        (d,) = [d for p in art.program.execution_plan for d in p.delegates]
        assert d.id == "EthosUBackend" and d.decoded is not None, d.decode_error
        eu = d.decoded
        summary = read_sidecar(case.vela).partitions[0].summary
        assert eu.scratch_size == summary.sram_bytes, case.key
        assert eu.weights_size == summary.flash_bytes, case.key
        assert eu.command_stream_version in ("COP1", "COP2")
        assert eu.command_stream_size > 0
        # I/O: the CNN takes 1x3x16x16 int8 and its Ethos-U part returns the 10 logits (argmax stays on the CPU)
        assert [io.squeezed_shape() for io in eu.inputs] == [(3, 16, 16)]
        assert [io.squeezed_shape() for io in eu.outputs] == [(10,)]
        assert eu.inputs[0].elem_size == 1 and eu.inputs[0].nbytes == 768
        # what Vela printed says the same (its text rounds to 0.01 KiB)
        text = open(case.stdout).read()
        assert f"{summary.sram_bytes / 1024:.2f} KiB" in text


def test_payload_blocks_tile_the_payload(ethosu_small):
    payload = _payload(ethosu_small["cnn@ethos-u55-128"].pte)
    eu = decode_ethosu(payload)
    assert [b.name for b in eu.blocks] == ["vela_bin_stream", "cmd_data", "weight_data", "scratch_size", "inputs",
                                           "outputs", "vela_end_stream"]
    assert eu.size == len(payload)
    assert eu.blocks[-1].offset == len(payload)  # the end block is empty and ends the payload exactly


def test_truncated_and_corrupted_payloads_raise_clear_errors(ethosu_small):
    payload = _payload(ethosu_small["cnn@ethos-u55-128"].pte)
    for cut in (10, 40, len(payload) // 2, len(payload) - 16):
        with pytest.raises(TruncatedFileError, match="truncated"):
            decode_ethosu(payload[:cut], name="p")
    with pytest.raises(FormatError, match="not a Vela bin stream"):
        decode_ethosu(b"\0" * 64, name="p")
    cmd = decode_ethosu(payload).blocks[1]
    bad = bytearray(payload)
    bad[cmd.offset:cmd.offset + 4] = b"XXXX"  # the command stream's driver magic
    with pytest.raises(FormatError, match="COP1/COP2"):
        decode_ethosu(bytes(bad), name="p")
    # an unknown block name
    bad = bytearray(payload)
    bad[cmd.offset - 32:cmd.offset - 16] = b"bogus_block\0\0\0\0\0"
    with pytest.raises(FormatError, match="unknown block 'bogus_block'"):
        decode_ethosu(bytes(bad), name="p")
    # an input count that does not fit its block
    bad = bytearray(payload)
    inputs = decode_ethosu(payload).blocks[4]
    struct.pack_into("<i", bad, inputs.offset, 1000)
    with pytest.raises(FormatError, match="says 1000 tensors"):
        decode_ethosu(bytes(bad), name="p")
    # trailing bytes after the end block
    with pytest.raises(FormatError, match="followed by"):
        decode_ethosu(payload + b"\0" * 32, name="p")


def test_a_corrupt_payload_keeps_the_program_readable(ethosu_small, tmp_path):
    """A .pte whose Ethos-U payload is damaged still reads; the delegate says why it was not decoded."""
    src = ethosu_small["cnn@ethos-u55-128"].pte
    art = read(src)
    (d,) = [d for p in art.program.execution_plan for d in p.delegates]
    data = bytearray(open(src, "rb").read())
    data[d.payload_offset + 64:d.payload_offset + 68] = b"XXXX"  # the command stream's magic (2nd block's data)
    bad = tmp_path / "bad.pte"
    bad.write_bytes(bytes(data))
    art = read(str(bad))
    (d,) = [d for p in art.program.execution_plan for d in p.delegates]
    assert d.decoded is None and "COP1/COP2" in d.decode_error
    from etlens.views.text import format_summary

    assert "payload not decoded" in format_summary(art.summary())

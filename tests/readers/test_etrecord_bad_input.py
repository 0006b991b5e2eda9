"""ETRecord reader on bad input: every failure is an EtlensError naming the file and the entry."""

from __future__ import annotations

import io
import zipfile

import pytest

from etlens.errors import EtlensError, FormatError, MissingDataError, TruncatedFileError
from etlens.readers import read as read_any
from etlens.readers.etrecord import read


def _rewrite(src: str, dst, *, drop=(), replace=None, extra=None) -> str:
    """Copy the ETRecord zip ``src`` to ``dst`` dropping/replacing/adding entries."""
    replace = replace or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            if info.filename in drop:
                continue
            zout.writestr(info.filename, replace.get(info.filename, zin.read(info.filename)))
        for name, data in (extra or {}).items():
            zout.writestr(name, data)
    return str(dst)


@pytest.fixture()
def good(committed):
    return committed["mlp_xnnpack"].etrecord


def test_not_a_zip(tmp_path):
    p = tmp_path / "model.etrecord"
    p.write_text("this is not a zip")
    with pytest.raises(FormatError, match=r"model\.etrecord.*not a readable zip"):
        read(p)


def test_missing_file(tmp_path):
    with pytest.raises(MissingDataError, match="no such file"):
        read(tmp_path / "nope.etrecord")


def test_zip_without_identifier(good, tmp_path):
    p = _rewrite(good, tmp_path / "x.etrecord", drop={"ETRECORD_V0"})
    with pytest.raises(FormatError, match="ETRECORD_V0.*generate_etrecord=True"):
        read(p)


def test_missing_program_entry(good, tmp_path):
    p = _rewrite(good, tmp_path / "x.etrecord", drop={"exported_program_state_dict"})
    with pytest.raises(MissingDataError, match="'exported_program_state_dict'"):
        read(p)


def test_malformed_map_json(good, tmp_path):
    p = _rewrite(good, tmp_path / "x.etrecord", replace={"debug_handle_map": b"{not json"})
    with pytest.raises(FormatError, match="'debug_handle_map' is not valid JSON"):
        read(p)


def test_map_with_wrong_shape(good, tmp_path):
    p = _rewrite(good, tmp_path / "x.etrecord", replace={"debug_handle_map": b'{"forward": {"a": "b"}}'})
    with pytest.raises(FormatError, match="unexpected contents"):
        read(p)
    p = _rewrite(good, tmp_path / "y.etrecord", replace={"delegate_map": b"[1, 2]"})
    with pytest.raises(FormatError, match="'delegate_map' should be a JSON object"):
        read(p)


def test_malformed_program_json(good, tmp_path):
    p = _rewrite(good, tmp_path / "x.etrecord", replace={"exported_program": b"\x00\x01garbage"})
    rec = read(p)  # programs are read lazily
    with pytest.raises(FormatError, match="'exported_program' is not valid JSON"):
        rec.graphs()
    p = _rewrite(good, tmp_path / "y.etrecord", replace={"exported_program": b'{"something": 1}'})
    with pytest.raises(FormatError, match="not a serialized ExportedProgram"):
        read(p).load_exported_program("exported_program")


def test_path_tricks_refused(good, tmp_path):
    p = _rewrite(good, tmp_path / "x.etrecord", extra={"../../evil": b"x"})
    with pytest.raises(FormatError, match=r"'\.\./\.\./evil' escapes the archive"):
        read(p)


def test_absurd_declared_size(good, tmp_path):
    """A central directory claiming a 2 GiB entry in a small file is refused before reading."""
    p = _rewrite(good, tmp_path / "x.etrecord")
    data = bytearray(open(p, "rb").read())
    name = b"debug_handle_map"
    pos = 0
    while True:  # find the central-directory record of the entry
        pos = data.index(b"PK\x01\x02", pos)
        n = int.from_bytes(data[pos + 28:pos + 30], "little")
        if data[pos + 46:pos + 46 + n] == name:
            break
        pos += 4
    data[pos + 24:pos + 28] = (0x7FFFFFFF).to_bytes(4, "little")  # uncompressed size
    bad = tmp_path / "big.etrecord"
    bad.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="'debug_handle_map' declares 2147483647 bytes"):
        read(bad)


def test_truncated(good, tmp_path):
    data = open(good, "rb").read()
    p = tmp_path / "cut.etrecord"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match="cut.etrecord"):
        read(p)


def test_corrupted_entry_bytes(good, tmp_path):
    p = _rewrite(good, tmp_path / "x.etrecord")
    data = bytearray(open(p, "rb").read())
    i = data.index(b'{"forward"')  # inside the stored debug_handle_map bytes
    data[i + 3] ^= 0xFF
    bad = tmp_path / "crc.etrecord"
    bad.write_bytes(bytes(data))
    with pytest.raises(TruncatedFileError, match="crc.etrecord.*truncated or corrupt"):
        read(bad)


def test_pickled_code_is_never_loaded(good, tmp_path):
    """Objects outside the weights-only allow-list are refused (torch.load(weights_only=True))."""
    import fractions

    import torch

    buf = io.BytesIO()
    torch.save([(fractions.Fraction(1, 3),)], buf)
    p = _rewrite(good, tmp_path / "x.etrecord", replace={"representative_inputs": buf.getvalue()})
    rec = read(p)
    with pytest.raises(FormatError, match="'representative_inputs'.*weights_only=True"):
        _ = rec.representative_inputs
    buf = io.BytesIO()
    torch.save({"w": fractions.Fraction(1, 2)}, buf)
    p = _rewrite(good, tmp_path / "y.etrecord", replace={"exported_program_state_dict": buf.getvalue()})
    with pytest.raises(FormatError, match="'exported_program_state_dict'.*never unpickles"):
        read(p).load_exported_program("exported_program")


def test_unknown_stage(good):
    rec = read(good)
    with pytest.raises(MissingDataError, match="no program 'nope'.*stages: exported_program"):
        rec.graph("nope")


def test_registry_routes_to_this_reader(good):
    rec = read_any(good)
    assert rec.format == "etrecord" and rec.stages


def test_optional_entries_absent(good, tmp_path):
    p = _rewrite(good, tmp_path / "x.etrecord", drop={"representative_inputs", "export_graph_id",
                                                      "delegate_map"})
    rec = read(p)
    assert rec.representative_inputs is None and rec.reference_outputs is None
    assert rec.export_graph_id is None and rec.delegate_map == {}
    assert rec.summary()["has_representative_inputs"] is False


def test_errors_are_etlens_errors(tmp_path):
    p = tmp_path / "empty.etrecord"
    p.write_bytes(b"")
    with pytest.raises(EtlensError):
        read(p)
    d = tmp_path / "dir.etrecord"
    d.mkdir()
    with pytest.raises(MissingDataError, match="is a directory"):
        read(d)


def _renamed(src: str, dst, rename) -> str:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(rename(info.filename), zin.read(info.filename))
    return str(dst)


def test_old_single_edge_program_layout(good, tmp_path):
    """Older ETRecords stored the edge program as ``edge_dialect_exported_program`` (no method)."""
    p = _renamed(good, tmp_path / "old.etrecord",
                 lambda n: n.replace("edge_dialect_exported_program/forward", "edge_dialect_exported_program"))
    rec = read(p)
    assert rec.stages == ["exported_program", "edge_dialect_exported_program/forward"]
    g = rec.graph("edge_dialect_exported_program/forward").lint()
    assert g.debug_handle_coverage()[0] > 0


def test_several_methods_and_graph_map(good, tmp_path):
    """Every edge method and every graph-map entry is a stage, in ExecuTorch's order."""
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(tmp_path / "multi.etrecord", "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            zout.writestr(info.filename, data)
            if info.filename.startswith("edge_dialect_exported_program/forward"):
                zout.writestr(info.filename.replace("/forward", "/decode"), data)
            if info.filename.startswith("exported_program"):
                zout.writestr(info.filename.replace("exported_program", "quantized/forward", 1), data)
    rec = read(tmp_path / "multi.etrecord")
    assert rec.stages == ["exported_program", "edge_dialect_exported_program/forward",
                          "edge_dialect_exported_program/decode", "quantized/forward"]
    assert rec.edge_stages == ["edge_dialect_exported_program/forward", "edge_dialect_exported_program/decode"]
    assert rec.graph_map_stages == ["quantized/forward"]
    graphs = rec.graphs()
    assert graphs["quantized/forward"].meta["dialect"] == "graph_map"
    assert graphs["edge_dialect_exported_program/decode"].meta["method"] == "decode"
    assert [n.name for n in graphs["quantized/forward"]] == [n.name for n in graphs["exported_program"]]

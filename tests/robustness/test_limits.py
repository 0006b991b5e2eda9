"""Resource limits and code execution: hand-made hostile files that mutation rarely produces.

* zip entries (ETRecord, .pt2) that declare absurd sizes, escape the archive (``../``, absolute
  names), or inflate 1000:1 (a zip bomb) are refused quickly and with little memory;
* a pickle with a ``__reduce__`` that would create a marker file, placed in every tensor entry of
  an ETRecord and in a .pt2, never runs (``weights_only=True`` everywhere, also inside torch's
  own .pt2 loader, which otherwise falls back to full unpickling);
* FlatBuffer vector lengths of 2^31 in a .pte / .etdp fail fast, bounded by the file size;
* deep JSON nesting and wrong file types end in an ``EtlensError``.
"""

from __future__ import annotations

import io
import re
import struct
import tracemalloc
import zlib
from pathlib import Path

import pytest

from tests.robustness import _harness as H
from etlens.errors import EtlensError

ROOT = H.ROOT
SRC = ROOT / "src" / "etlens"


def _read_all(kind: str, path: str, debug: str | None = None) -> None:
    H.exercise(kind, path, debug)


def _expect_error(kind: str, path: Path, *, match: str | None = None, seconds: float = 2.0,
                  heap_mb: int = 64) -> EtlensError:
    """``kind`` reader on ``path`` raises an EtlensError within ``seconds`` CPU and ``heap_mb``."""
    tracemalloc.start()
    try:
        out = H._attempt(lambda: _read_all(kind, str(path)), seconds)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.failure is None, out.failure
    assert out.error, f"{kind} reader accepted {path.name}"
    assert peak < heap_mb << 20, f"heap peak {peak >> 20} MB"
    with pytest.raises(EtlensError, match=match) as info:
        _read_all(kind, str(path))
    return info.value


@pytest.fixture(scope="module")
def seeds():
    return {k: dict(v) for k, v in H.committed_seeds().items()}


@pytest.fixture(scope="module")
def etrecord_entries():
    return H.zip_entries((H.DATA / "mlp_portable.etrecord").read_bytes())


# -- zip: declared sizes, names, bombs ---------------------------------------------------------------
@pytest.mark.parametrize("kind,entry", [("etrecord", "debug_handle_map"), ("etrecord", "exported_program"),
                                        ("pt2", "mlp_portable/models/model.json")])
@pytest.mark.parametrize("size", [0xFFFFFFFF, 0x7FFFFFFF, 10 << 20])
def test_zip_entry_with_huge_declared_size_is_refused(tmp_path, kind, entry, size):
    src = (H.DATA / f"mlp_portable.{kind}").read_bytes()
    p = tmp_path / f"big.{kind}"
    p.write_bytes(H.zip_with_declared_size(src, entry, size))
    err = _expect_error(kind, p)
    assert p.name in str(err)


@pytest.mark.parametrize("name", ["../escape", "../../etc/passwd", "/abs/path", "a/../../b", "C:/win",
                                  "..\\win"])
@pytest.mark.parametrize("kind", ["etrecord", "pt2"])
def test_zip_entry_names_escaping_the_archive_are_refused(tmp_path, etrecord_entries, kind, name):
    entries = etrecord_entries if kind == "etrecord" else H.zip_entries((H.DATA / "mlp_portable.pt2").read_bytes())
    rows = [(i.filename, d) for i, d in entries] + [(name, b"{}")]
    data = H.build_zip(rows)
    p = tmp_path / f"names.{kind}"
    p.write_bytes(data)
    _expect_error(kind, p, match="escapes the archive|not a|corrupt|cannot|refus")


def test_etrecord_zip_bomb_is_refused_without_inflating(tmp_path, etrecord_entries):
    bomb = H.zip_bomb_entry(64 << 20)  # 64 MiB of zeros in ~64 KiB
    rows = []
    for info, data in etrecord_entries:
        payload = data
        if info.filename == "debug_handle_map":
            rows.append((info.filename, bomb, 8, zlib.crc32(bytes(64 << 20)) & 0xFFFFFFFF, 64 << 20))
            continue
        rows.append((info.filename, payload, 0, zlib.crc32(payload) & 0xFFFFFFFF, len(payload)))
    p = tmp_path / "bomb.etrecord"
    p.write_bytes(H.raw_zip(rows))
    _expect_error("etrecord", p, match="debug_handle_map", heap_mb=32)


def test_pt2_zip_bomb_is_refused_before_torch_reads_it(tmp_path):
    entries = H.zip_entries((H.DATA / "mlp_portable.pt2").read_bytes())
    zeros_crc = zlib.crc32(bytes(64 << 20)) & 0xFFFFFFFF
    bomb = H.zip_bomb_entry(64 << 20)
    rows = [(i.filename, d, 0, zlib.crc32(d) & 0xFFFFFFFF, len(d)) for i, d in entries]
    rows.append(("mlp_portable/data/weights/huge", bomb, 8, zeros_crc, 64 << 20))
    p = tmp_path / "bomb.pt2"
    p.write_bytes(H.raw_zip(rows))
    _expect_error("pt2", p, heap_mb=32)


def test_etrecord_with_many_entries_stays_bounded(tmp_path, etrecord_entries):
    rows = [(i.filename, d) for i, d in etrecord_entries] + [(f"junk/{i}", b"") for i in range(20000)]
    p = tmp_path / "many.etrecord"
    p.write_bytes(H.build_zip(rows))
    out = H._attempt(lambda: _read_all("etrecord", str(p)), 2.0)
    assert out.failure is None, out.failure


# -- no code execution on load -----------------------------------------------------------------------
class _Marker:
    """Pickles as ``open(marker, 'w')``: loading it unsafely creates the marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _evil_payloads(marker: Path) -> dict[str, bytes]:
    import pickle

    import torch

    buf = io.BytesIO()
    torch.save(_Marker(str(marker)), buf)
    nested = io.BytesIO()
    torch.save({"w": torch.zeros(2), "x": _Marker(str(marker))}, nested)
    return {"torch_zip": buf.getvalue(), "nested": nested.getvalue(),
            "raw_pickle": pickle.dumps(_Marker(str(marker)), protocol=2)}


@pytest.mark.parametrize("flavour", ["torch_zip", "nested", "raw_pickle"])
def test_malicious_pickle_in_etrecord_tensor_entries_never_runs(tmp_path, etrecord_entries, flavour):
    marker = tmp_path / "PWNED"
    evil = _evil_payloads(marker)[flavour]
    tensor_entries = [i.filename for i, _ in etrecord_entries
                      if i.filename.endswith(("_state_dict", "_constants", "_example_inputs"))]
    assert tensor_entries, "fixture lost its tensor entries"
    tensor_entries += ["representative_inputs", "reference_outputs"]
    rows = [(i.filename, evil if i.filename in tensor_entries else d) for i, d in etrecord_entries]
    have = {i.filename for i, _ in etrecord_entries}
    rows += [(n, evil) for n in ("representative_inputs", "reference_outputs") if n not in have]
    p = tmp_path / "evil.etrecord"
    p.write_bytes(H.build_zip(rows))

    from etlens.readers import etrecord

    rec = etrecord.read(str(p))
    attempts = [lambda: rec.summary(), lambda: rec.graphs(), lambda: rec.representative_inputs,
                lambda: rec.reference_outputs, lambda: rec.load_exported_program(),
                lambda: rec.exported_program, lambda: rec.edge_dialect_program, lambda: rec.graph_map]
    for fn in attempts:
        try:
            fn()
        except EtlensError:
            pass
    from etlens.analysis.inspector import Inspector

    try:
        Inspector(etdump_path=str(H.DATA / "mlp_portable.etdp"), etrecord=str(p)).to_dataframe()
    except EtlensError:
        pass
    try:  # numerics loads state dicts with its own restricted unpickler
        Inspector(etdump_path=str(H.DATA / "mlp_portable.etdp"), etrecord=str(p),
                  debug_buffer_path=str(H.DATA / "mlp_portable.debug.bin")).calculate_numeric_gap()
    except EtlensError:
        pass
    assert not marker.exists(), "a pickle from the ETRecord was executed"
    with pytest.raises(EtlensError, match="weights_only|plain tensors|never unpickles"):
        rec.representative_inputs  # noqa: B018


@pytest.mark.parametrize("entry", ["data/sample_inputs/model.pt", "data/weights/weight_0"])
def test_malicious_pickle_in_pt2_never_runs(tmp_path, entry):
    marker = tmp_path / "PWNED"
    evil = _evil_payloads(marker)["torch_zip"]
    entries = H.zip_entries((H.DATA / "mlp_portable.pt2").read_bytes())
    rows = [(i.filename, evil if i.filename.endswith(entry) else d) for i, d in entries]
    if entry.endswith("weight_0"):  # declare the weight as pickled so torch's loader unpickles it
        rows = [(n, d.replace(b'"use_pickle": false', b'"use_pickle": true', 1)
                 if n.endswith("model_weights_config.json") else d) for n, d in rows]
    p = tmp_path / "evil.pt2"
    p.write_bytes(H.build_zip(rows))
    with pytest.raises(EtlensError):
        H.exercise("pt2", str(p))
    assert not marker.exists(), "a pickle from the .pt2 was executed"


def test_every_torch_load_in_src_is_weights_only():
    """Grep: each ``torch.load(`` call in src/ passes ``weights_only=True``."""
    calls = []
    for f in SRC.rglob("*.py"):
        text = f.read_text()
        for m in re.finditer(r"torch\.load\(", text):
            depth, end = 0, m.end() - 1
            for end in range(m.end() - 1, len(text)):  # up to the matching parenthesis
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            call = text[m.start():end + 1]
            calls.append((f.name, call))
    assert calls, "expected the ETRecord tensor loader to call torch.load"
    bad = [c for c in calls if "weights_only=True" not in c[1]]
    assert not bad, bad
    assert not re.search(r"\bpickle\.loads?\(|\bdill\b|(?<!`)weights_only\s*=\s*False", "".join(
        f.read_text() for f in SRC.rglob("*.py")))


# -- counts bounded by the file size -----------------------------------------------------------------
def _vector_length_positions(data: bytes) -> list[int]:
    """Positions of plausible FlatBuffer vector lengths (targets of offsets holding a small count)."""
    out = []
    for p in range(0, len(data) - 8, 4):
        v = struct.unpack_from("<I", data, p)[0]
        t = p + v
        if 4 <= v and t + 4 <= len(data) and 0 < struct.unpack_from("<I", data, t)[0] < 4096:
            out.append(t)
    return sorted(set(out))


@pytest.mark.parametrize("kind", ["pte", "etdump"])
@pytest.mark.parametrize("value", [1 << 31, 0xFFFFFFFF, 1 << 28])
def test_absurd_vector_lengths_fail_fast_with_little_memory(tmp_path, kind, value):
    data = (H.DATA / f"mlp_portable.{'pte' if kind == 'pte' else 'etdp'}").read_bytes()
    positions = _vector_length_positions(data)
    assert len(positions) > 10
    tracemalloc.start()
    try:
        worst = 0.0
        errors = 0
        for pos in positions[:: max(1, len(positions) // 60)]:
            b = bytearray(data)
            struct.pack_into("<I", b, pos, value)
            out = H.check(kind, bytes(b), tmp_path)
            assert out.failure is None, f"length {value:#x} at {pos}: {out.failure}"
            worst = max(worst, out.elapsed)
            errors += out.error is not None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert errors, "no absurd length was noticed"
    assert worst < 1.0
    assert peak < 64 << 20, f"heap peak {peak >> 20} MB for a {len(data)}-byte file"


@pytest.mark.parametrize("kind", ["pte", "etdump"])
def test_truncation_at_every_offset(tmp_path, kind):
    data = (H.DATA / f"mlp_portable.{'pte' if kind == 'pte' else 'etdp'}").read_bytes()
    step = max(1, len(data) // 200)
    for cut in list(range(0, 64)) + list(range(64, len(data), step)):
        out = H.check(kind, data[:cut], tmp_path)
        assert out.failure is None, f"cut at {cut}: {out.failure}"
        assert out.error, f"{kind} truncated to {cut} of {len(data)} bytes was accepted"


def test_debug_buffer_truncated_at_many_offsets(tmp_path):
    etdp, dbg = H.debug_seed()
    used = 0
    for cut in [0, 1, 7, 64, 1000, 4096, 10000, len(dbg) // 2, len(dbg) - 1]:
        out = H.check("etdump", etdp, tmp_path, debug=dbg[:cut])
        assert out.failure is None, f"debug buffer cut at {cut}: {out.failure}"
        used += out.error is not None
    assert used, "a truncated debug buffer was never noticed"


# -- JSON nesting, wrong file types -------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["trace", "graph"])
@pytest.mark.parametrize("head", ["", '{"schema": "etlens.graph", "version": 1, "meta": ',
                                  '{"schema": "etlens.trace", "version": 1, "snapshots": '])
def test_deeply_nested_json(tmp_path, kind, head):
    out = H.check(kind, H.deep_json(200_000, head), tmp_path)
    assert out.failure is None, out.failure
    assert out.error


def test_deep_delegate_nesting_in_graph_json(tmp_path, seeds):
    import json

    text = next(iter(seeds["graph"].values())).decode()
    g = json.loads(text)
    # a delegate whose inner graph has a delegate whose inner graph … (3000 levels, built as text)
    marker = '"delegate": ' + json.dumps(g["nodes"]["delegate"])
    assert marker in text
    head, tail = text.split(marker, 1)
    rest = g["nodes"]["delegate"][1:]
    close = "}]" + (", " + json.dumps(rest)[1:] if rest else "") + tail
    doc = (head + '"delegate": [{"backend_id": "X", "inner": ') * 3000 + text + close * 3000
    out = H.check("graph", doc.encode(), tmp_path)
    assert out.failure is None, out.failure


WRONG = {
    "empty": b"",
    "png": b"\x89PNG\r\n\x1a\n" + bytes(100),
    "text": b"hello world\n" * 10,
    "zip_empty": H.build_zip([]),
    "zip_other": H.build_zip([("a.txt", b"hi")]),
    "json_list": b"[1, 2, 3]",
    "json_other_schema": b'{"schema": "something.else", "version": 1}',
    "nul": bytes(4096),
    "ff": b"\xff" * 4096,
}


@pytest.mark.parametrize("kind", ["pte", "etdump", "etrecord", "pt2", "trace", "graph", "sniff"])
def test_wrong_file_types(tmp_path, seeds, kind):
    cases = dict(WRONG)
    for other, items in seeds.items():  # every other format's real file
        if other != kind:
            cases[f"real_{other}"] = next(iter(items.values()))
    for label, data in cases.items():
        out = H.check(kind, data, tmp_path, name=label)
        assert out.failure is None, f"{kind} reader on {label}: {out.failure}"
        if kind != "sniff":
            assert out.error, f"{kind} reader accepted {label}"


@pytest.mark.parametrize("kind", ["pte", "etdump", "etrecord", "pt2", "trace", "graph", "sniff"])
def test_directory_and_missing_file(tmp_path, kind):
    for target in (tmp_path, tmp_path / "missing.bin"):
        out = H._attempt(lambda target=target: H.exercise(kind, str(target)), 2.0)
        assert out.failure is None, out.failure
        assert out.error in ("MissingDataError", "UnsupportedFormatError", "FormatError"), out.error

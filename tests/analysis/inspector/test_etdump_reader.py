"""The native ETDump reader against ExecuTorch's flatc-based deserializer, and on bad input."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from tests.conftest import requires_executorch

import etlens
from etlens.errors import EtlensError, FormatError, MissingDataError, TruncatedFileError
from etlens.readers.etdump import (ALLOCATION, DEBUG, PROFILE, SCALAR_TYPES, DebugBuffer, TensorRef, read,
                                   read_etdump)

CASES = ["mlp_xnnpack", "mlp_portable", "cnn_q8_xnnpack", "mixed_xnnpack", "transformer_portable"]


@requires_executorch
@pytest.mark.parametrize("case", CASES)
def test_every_field_matches_executorch(artifacts, case):
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    path = artifacts[case].etdump
    with open(path, "rb") as f:
        ref = deserialize_from_etdump_flatcc(f.read())
    dump = read_etdump(path)
    assert dump.version == ref.version
    assert len(dump.runs) == len(ref.run_data)
    for ri, (run, rr) in enumerate(zip(dump.runs, ref.run_data)):
        assert run.name == rr.name and run.bundled_input_index == rr.bundled_input_index
        assert run.allocators == [a.name for a in (rr.allocators or [])]
        assert len(run) == len(rr.events or [])
        for i, ev in enumerate(rr.events or []):
            if ev.profile_event is not None:
                pe = ev.profile_event
                assert run.kind[i] == PROFILE
                assert dump.string(int(run.name_id[i])) == pe.name
                assert int(run.chain_index[i]) == pe.chain_index
                assert int(run.instruction_id[i]) == pe.instruction_id
                assert int(run.delegate_id_int[i]) == pe.delegate_debug_id_int
                assert dump.string(int(run.delegate_id_str[i])) == pe.delegate_debug_id_str
                assert dump.metadata(ri, i) == pe.delegate_debug_metadata
                assert int(run.start_time[i]) == pe.start_time and int(run.end_time[i]) == pe.end_time
            elif ev.debug_event is not None:
                de = ev.debug_event
                assert run.kind[i] == DEBUG
                assert int(run.chain_index[i]) & (2 ** 64 - 1) == de.chain_index
                assert int(run.instruction_id[i]) == de.instruction_id
                assert bool(run.is_output[i]) == bool(de.debug_entry.output and de.debug_entry.output.bool_val)
                vt, payload = dump.debug_entry(ri, i)
                t = de.debug_entry.tensor
                if t is not None:
                    assert isinstance(payload, TensorRef)
                    assert list(payload.sizes) == t.sizes and list(payload.strides) == t.strides
                    assert payload.offset == t.offset and SCALAR_TYPES[payload.scalar_type][0] == t.scalar_type.name
            else:
                assert run.kind[i] == ALLOCATION


def test_committed_dump_reads_without_executorch(committed):
    dump = read_etdump(committed["mlp_portable"].etdump)
    assert [r.name for r in dump.runs][:1] == ["Default"]
    counts = dump.runs[1].counts()
    assert counts["profile"] > 0 and counts["debug"] > 0
    art = etlens.read(committed["mlp_portable"].etdump)
    s = art.summary()
    assert s["format"] == "etdump" and s["runs"] == len(dump.runs)
    assert s["events"] == sum(len(r) for r in dump.runs)
    assert s["events_by_kind"]["profile"] > 0 and s["time_span"]["ticks"] > 0
    assert "allocators" in s


def test_tensor_decoding_matches_buffer_bytes(committed):
    import torch

    art = committed["mlp_portable"]
    dump = read_etdump(art.etdump)
    buf = DebugBuffer(art.debug_buffer)
    raw = open(art.debug_buffer, "rb").read()
    r = 1
    for i in dump.runs[r].debug_indices()[:5].tolist():
        vt, ref = dump.debug_entry(r, i)
        t = dump.debug_value(r, i, buf)
        assert isinstance(t, torch.Tensor) and tuple(t.shape) == ref.sizes
        expect = np.frombuffer(raw, dtype="<f4", count=int(np.prod(ref.sizes)), offset=ref.offset)
        assert np.array_equal(t.numpy().ravel(), expect)
        # no buffer: zeros of the right shape, as ExecuTorch does
        z = dump.debug_value(r, i, None)
        assert z.shape == t.shape and not z.any()


@pytest.mark.parametrize("code,torch_name", [(15, "bfloat16"), (5, "float16"), (1, "int8"), (0, "uint8"),
                                             (11, "bool"), (6, "float32"), (4, "int64"), (7, "float64"),
                                             (2, "int16"), (3, "int32"), (23, "float8_e5m2"), (27, "uint16")])
def test_every_scalar_type_decodes(code, torch_name):
    import torch

    dtype = getattr(torch, torch_name)
    src = (torch.arange(12) % 2 == 1) if dtype == torch.bool else torch.arange(12).to(dtype)
    nbytes = src.numel() * src.element_size()
    payload = b"\xaa" * 16 + src.contiguous().view(torch.uint8).numpy().tobytes() + b"\0" * 8
    buf = DebugBuffer(data=payload)
    t = buf.tensor(TensorRef(code, (3, 4), (4, 1), 16))
    assert t.dtype == dtype and t.shape == (3, 4)
    assert torch.equal(t.view(torch.uint8).reshape(-1), src.view(torch.uint8).reshape(-1))
    with pytest.raises(FormatError, match="past the"):
        buf.tensor(TensorRef(code, (3, 4), (4, 1), len(payload) - nbytes + 1))


def test_truncated_file(tmp_path, committed):
    data = open(committed["mlp_portable"].etdump, "rb").read()
    for cut in (6, 40, len(data) // 2, len(data) - 1):
        p = tmp_path / f"cut{cut}.etdp"
        p.write_bytes(data[:cut])
        with pytest.raises(TruncatedFileError, match="truncated|too short"):
            read_etdump(str(p))


def test_wrong_identifier(tmp_path, committed):
    p = tmp_path / "x.etdp"
    p.write_bytes(open(committed["mlp_portable"].pte, "rb").read())
    with pytest.raises(FormatError, match="not an ETDump"):
        read_etdump(str(p))
    with pytest.raises(EtlensError):
        etlens.Inspector(etdump_path=str(p))


def test_corrupt_offsets_raise_format_error(tmp_path, committed):
    data = bytearray(open(committed["mlp_portable"].etdump, "rb").read())
    rng = np.random.default_rng(0)
    raised = 0
    for trial in range(60):
        bad = bytearray(data)
        for pos in rng.integers(12, len(bad), size=8):
            bad[int(pos)] = int(rng.integers(0, 256))
        p = tmp_path / f"bad{trial}.etdp"
        p.write_bytes(bytes(bad))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                etlens.Inspector(etdump_path=str(p)).to_dataframe()
        except EtlensError:
            raised += 1
    # corruption either still parses (a timestamp changed) or gives a clear EtlensError; any other
    # exception escapes and fails the test; with this seed most trials hit a structural field
    assert raised > 10


def test_missing_files(tmp_path, committed):
    with pytest.raises(MissingDataError, match="no such file"):
        read_etdump(str(tmp_path / "nope.etdp"))
    with pytest.raises(MissingDataError, match="debug buffer not found"):
        etlens.Inspector(etdump_path=committed["mlp_portable"].etdump, debug_buffer_path=str(tmp_path / "nope.bin"))


def test_missing_debug_buffer_warns_and_timings_work(committed):
    with pytest.warns(UserWarning, match="Tensor Debug Data will not be available"):
        insp = etlens.Inspector(etdump_path=committed["mlp_portable"].etdump)
    df = insp.to_dataframe()
    assert df["p50 (ms)"].notna().all()


def test_short_debug_buffer_warns(tmp_path, committed):
    import torch

    art = committed["mlp_portable"]
    full = open(art.debug_buffer, "rb").read()
    dump = read_etdump(art.etdump)
    offs = [dump.debug_entry(1, i)[1].offset for i in dump.runs[1].debug_indices().tolist()]
    cut = sorted(offs)[len(offs) // 2] + 4
    p = tmp_path / "short.bin"
    p.write_bytes(full[:cut])
    with pytest.warns(UserWarning, match="past the end of the .*debug buffer"):
        insp = etlens.Inspector(etdump_path=art.etdump, debug_buffer_path=str(p))
    df = insp.to_dataframe()
    values = [v for cell in df["debug_data"] for v in cell]
    assert any(v is None for v in values) and any(isinstance(v, torch.Tensor) for v in values)
    assert df["p50 (ms)"].notna().all()


@requires_executorch
def test_etrecord_from_another_model_warns(artifacts):
    with pytest.warns(UserWarning, match="does not match this ETDump"):
        insp = etlens.Inspector(etdump_path=artifacts["transformer_portable"].etdump,
                                etrecord=artifacts["mlp_portable"].etrecord,
                                debug_buffer_path=artifacts["transformer_portable"].debug_buffer)
    assert len(insp.to_dataframe()) > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        etlens.Inspector(etdump_path=artifacts["transformer_portable"].etdump,
                         etrecord=artifacts["transformer_portable"].etrecord,
                         debug_buffer_path=artifacts["transformer_portable"].debug_buffer)


def test_registry_sniffs_etdump(committed):
    from etlens.readers import sniff

    assert sniff(committed["mlp_xnnpack"].etdump).format == "etdump"
    assert isinstance(read(committed["mlp_xnnpack"].etdump).dump.runs, list)
    assert os.path.exists(committed["mlp_xnnpack"].etdump)


def test_interning_keeps_near_identical_strings_apart():
    from etlens.readers._flatbuffers.columns import FB

    words = [b"a", b"a\0", b"ab", b"a", b"", b"x" * 300, b"x" * 299 + b"y", b"ab", b"b" * 17, b"b" * 16]
    blob = b"".join(len(w).to_bytes(4, "little") + w for w in words)
    starts, pos = [], 0
    for w in words:
        starts.append(pos)
        pos += 4 + len(w)
    fb = FB(blob)
    table, names = {}, []
    st = np.array(starts, dtype=np.int64) + 4
    ln = np.array([len(w) for w in words], dtype=np.int64)
    ids = fb.intern(st, ln, table, names)
    assert [names[i].encode() for i in ids] == [w for w in words]
    assert ids[0] == ids[3] and ids[2] == ids[7] and len(set(ids.tolist())) == 8
    short = fb.intern(st[:5], ln[:5], {}, [])
    assert short[0] == short[3] and short[0] != short[1]


def test_inspector_works_without_executorch(committed, tmp_path):
    """Reading a dump and building the table never imports ExecuTorch (nor torch without tensors)."""
    import subprocess
    import sys

    art = committed["mlp_portable"]
    code = f"""
import sys, warnings
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "executorch" or name.startswith("executorch."):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
warnings.simplefilter("ignore")
import etlens
insp = etlens.Inspector(etdump_path={art.etdump!r}, etrecord={art.etrecord!r}, debug_buffer_path={art.debug_buffer!r})
df = insp.to_dataframe()
assert len(df) > 5 and df["op_types"].map(len).sum() > 0
print("torch" in sys.modules, "executorch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]

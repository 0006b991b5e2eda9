"""The torch.save reader (``etlens.readers.torch_save``) against ``torch.load(weights_only=True)``.

Every checkpoint torch writes must load to the same tensors (values, dtypes, shapes, strides, storage
sharing, ``requires_grad``, ``Parameter`` or not); the one-pass central-directory reader must agree
with ``zipfile`` entry by entry; and anything that is not a plain checkpoint must raise (the caller
then falls back to torch's own safe loader), never load something else.
"""

from __future__ import annotations

import io
import pickle
import zipfile

import pytest

torch = pytest.importorskip("torch")

from etlens.readers.torch_save import _stored_entries, _stored_spans, load_tensors_fast  # noqa: E402


#: what a damaged archive may raise; the caller (``ETRecord.stage_tensors``) then tries torch's loader
_REFUSED = (zipfile.BadZipFile, pickle.UnpicklingError, ValueError, EOFError, KeyError, RuntimeError)


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _checkpoints() -> dict:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 4, generator=g)
    lin = torch.nn.Linear(4, 3)
    return {
        "state dict with parameters": lin.state_dict(keep_vars=True),
        "plain state dict": torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(),
                                                torch.nn.Linear(5, 2)).state_dict(),
        "many entries": {f"layer{i}.weight": torch.full((2, 2), float(i)) for i in range(300)},
        "dtypes": {str(dt): torch.arange(5).to(dt) for dt in (torch.float16, torch.bfloat16, torch.float64,
                                                              torch.int8, torch.uint8, torch.int32,
                                                              torch.int64, torch.bool, torch.complex64)},
        "views sharing one storage": {"whole": base, "row": base[2], "column": base[:, 1], "t": base.t()},
        "tied": {"a": base, "b": base},
        "empty and scalar": {"empty": torch.empty(0, 3), "scalar": torch.tensor(2.5)},
        "nested containers": {"list": [torch.ones(2), torch.zeros(1)], "tuple": (torch.eye(2),)},
        "empty dict": {},
    }


def _same(a, b) -> None:
    if isinstance(a, torch.Tensor):
        assert type(a) is type(b)
        assert (a.dtype, tuple(a.shape), a.stride(), a.requires_grad) == (b.dtype, tuple(b.shape), b.stride(),
                                                                           b.requires_grad)
        assert torch.equal(a.detach(), b.detach())
        return
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("name", list(_checkpoints()))
def test_loads_what_torch_loads(name):
    data = _saved(_checkpoints()[name])
    assert _stored_entries(data) is not None, "torch's own archive should take the one-pass path"
    _same(load_tensors_fast(data), torch.load(io.BytesIO(data), weights_only=True))


def test_views_keep_sharing_their_storage():
    base = torch.arange(12.0).reshape(3, 4)
    got = load_tensors_fast(_saved({"whole": base, "row": base[1]}))
    got["whole"][1, 0] = -1.0
    assert got["row"][0].item() == -1.0


def test_central_directory_matches_zipfile():
    data = _saved(_checkpoints()["many entries"])
    assert _stored_entries(data) == _stored_spans(zipfile.ZipFile(io.BytesIO(data)), data)


def test_archives_torch_does_not_write_take_the_zipfile_path():
    data = _saved({"w": torch.ones(3)})
    with_comment = data[:-2] + (5).to_bytes(2, "little") + b"hello"  # an archive comment after the EOCD
    assert _stored_entries(with_comment) is None
    _same(load_tensors_fast(with_comment), {"w": torch.ones(3)})
    # compressed entries: zipfile reads them, the result is the same
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            z.writestr(info.filename, src.read(info.filename))
    assert _stored_entries(out.getvalue()) is None
    _same(load_tensors_fast(out.getvalue()), {"w": torch.ones(3)})


@pytest.mark.parametrize("cut", [0, 10, 100, -30, -22, -1])
def test_truncated_or_garbled_archives_raise(cut):
    data = _saved({"w": torch.ones(300)})
    bad = data[:cut]
    with pytest.raises(_REFUSED):
        load_tensors_fast(bad)
    garbled = bytearray(data)
    garbled[len(data) // 2: len(data) // 2 + 64] = b"\xff" * 64
    try:
        got = load_tensors_fast(bytes(garbled))
    except _REFUSED:
        return
    assert set(got) == {"w"} and got["w"].shape == (300,)  # the bytes hit were tensor data, nothing else


def test_a_central_directory_pointing_outside_raises_or_falls_back():
    data = bytearray(_saved({"w": torch.ones(4)}))
    end = len(data) - 22
    cd_offset = int.from_bytes(data[end + 16:end + 20], "little")
    data[cd_offset + 42:cd_offset + 46] = (len(data) + 1000).to_bytes(4, "little")  # local header offset
    assert _stored_entries(bytes(data)) is None
    with pytest.raises(_REFUSED):
        load_tensors_fast(bytes(data))


def test_refuses_anything_but_tensors():
    class Evil:
        def __reduce__(self):
            return (print, ("ran code",))

    buf = io.BytesIO()
    torch.save({"x": Evil()}, buf)
    with pytest.raises(pickle.UnpicklingError, match="refusing global"):
        load_tensors_fast(buf.getvalue())

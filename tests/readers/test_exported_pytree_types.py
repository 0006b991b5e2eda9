"""A ``.pt2`` whose outputs are another library's container loads in a fresh process.

Hugging Face models return a ``ModelOutput``; ``torch.export.load`` can rebuild the program only where
that type is registered with torch's pytree — not in etlens' lowering child or a fresh ``etlens info``.
Here a small package stands in for the library: its output type is registered when it is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

PACKAGE = textwrap.dedent('''
    from dataclasses import dataclass

    import torch
    from torch.utils import _pytree as pytree


    @dataclass
    class Out:
        hidden: torch.Tensor
        logits: torch.Tensor


    pytree.register_dataclass(Out, serialized_type_name="outpkg.types.Out")


    class Model(torch.nn.Module):
        def forward(self, x):
            h = torch.relu(x)
            return Out(h, h.sum(-1))
''')

LOAD = textwrap.dedent('''
    import json, sys
    from etlens.errors import EtlensError
    from etlens.readers.exported import load_exported_program, spec_type_names
    try:
        ep = load_exported_program(sys.argv[1])
        print(json.dumps({"ok": ep.call_spec.out_spec.type.__qualname__, "names": spec_type_names(sys.argv[1])}))
    except EtlensError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
''')


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    torch = pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("pytree")
    (root / "outpkg").mkdir()
    (root / "outpkg" / "__init__.py").write_text("")
    (root / "outpkg" / "types.py").write_text(PACKAGE)
    sys.path.insert(0, str(root))
    try:
        from outpkg.types import Model

        ep = torch.export.export(Model(), (torch.randn(2, 3),))
        torch.export.save(ep, str(root / "m.pt2"))
    finally:
        sys.path.remove(str(root))
    return root


def _load_in_fresh_process(pt2: str, extra_path: str | None) -> dict:
    paths = [str(ROOT / "src")] + ([extra_path] if extra_path else [])
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", LOAD, pt2], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_output_type_is_imported_before_loading(saved):
    got = _load_in_fresh_process(str(saved / "m.pt2"), str(saved))
    assert got["ok"] == "Out"
    assert "outpkg.types.Out" in got["names"]


def test_a_type_that_cannot_be_imported_is_named(saved):
    got = _load_in_fresh_process(str(saved / "m.pt2"), None)
    assert got["error"] == "FormatError"
    assert "outpkg.types.Out" in got["message"] and "install outpkg" in got["message"]
    assert str(saved / "m.pt2") in got["message"]


def test_hostile_type_names_import_nothing_and_are_named(saved, tmp_path):
    """A spec naming a module that is not installed (or a non-identifier) imports nothing; the error names it."""
    import zipfile

    src, dst = saved / "m.pt2", tmp_path / "hostile.pt2"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("models/model.json"):
                data = data.replace(b"outpkg.types.Out", b"nosuchpkg_x.evil.Out")
            zout.writestr(item, data)
    got = _load_in_fresh_process(str(dst), str(saved))
    assert got["error"] == "FormatError"
    assert "nosuchpkg_x.evil.Out" in got["message"] and "not installed" in got["message"]

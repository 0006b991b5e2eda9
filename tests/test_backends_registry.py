"""The backend registry (etlens.backends) and what a delegate of a backend with no folder still gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from etlens.backends import (NO_DECODER_NOTE, Backend, all_backends, by_name, for_build, for_delegate, hook,
                             register)
from etlens.errors import EtlensError

DATA = Path(__file__).resolve().parent / "data"


def test_lookup_by_delegate_id_and_build_name():
    names = [b.name for b in all_backends()]
    assert {"xnnpack", "ethosu", "cortex_m", "portable"} <= set(names)
    assert for_delegate("XnnpackBackend").name == "xnnpack"
    assert for_delegate("EthosUBackend").name == "ethosu" and for_delegate("ethosubackend").name == "ethosu"
    assert for_delegate("NoSuchNpuBackend") is None and for_delegate(None) is None
    assert for_build("ethos-u85-256").name == "ethosu" and for_build("nope") is None
    assert by_name("ethosu").attrs_key == "ethos_u" and by_name("xnnpack").label == "XNNPACK"


def test_hooks_are_imported_on_first_use():
    import sys

    decode = hook(by_name("xnnpack"), "payload")
    assert decode.__module__ == "etlens.backends.xnnpack.payload" and decode.__module__ in sys.modules
    assert hook(by_name("portable"), "payload") is None
    with pytest.raises(EtlensError, match="unknown hook role"):
        hook(by_name("xnnpack"), "frobnicate")


def test_register_refuses_a_taken_build_name_and_unknown_roles():
    with pytest.raises(EtlensError, match="already belong"):
        register(Backend("copycat", builds=("xnnpack",)))
    with pytest.raises(EtlensError, match="unknown hook role"):
        Backend("bad", hooks={"magic": "x:y"})
    spec = register(Backend("testnpu", ids=("TestNpuBackend",), hooks={"events": object()}))
    assert for_delegate("TestNpuBackend") is spec


def test_a_delegate_of_an_unknown_backend_gets_the_generic_facts():
    """The committed XNNPACK program with its delegate id renamed: no decoder, but size, id and a note."""
    from etlens.analysis.attribution import attributor_for
    from etlens.analysis.size import analyze_size
    from etlens.readers.pte import read_pte_bytes

    data = (DATA / "mlp_xnnpack.pte").read_bytes()
    assert data.count(b"XnnpackBackend") == 1
    data = data.replace(b"XnnpackBackend", b"QuietNpBackend")
    art = read_pte_bytes(data, "renamed.pte")
    d = art.program.execution_plan[0].delegates[0]
    assert d.id == "QuietNpBackend" and d.backend is None and d.decoded is None and d.payload_size > 0
    delegate = art.summary()["methods"][0]["delegates"][0]
    assert delegate["note"] == NO_DECODER_NOTE.format(id="QuietNpBackend") and delegate["ops"] == []
    size = analyze_size(data, "renamed.pte")
    assert sum(p.bytes for p in size.parts) == len(data)
    assert any(p.kind == "delegate" and "QuietNpBackend" in p.name for p in size.parts)
    assert attributor_for("QuietNpBackend") is None  # its events stay by name, its time one block

"""``etlens info``: readable text and JSON for a .pte, generic for other formats, clean errors."""

from __future__ import annotations

import json

import pytest

from etlens.cli.main import main


def _info(capsys, *args) -> tuple[int, str, str]:
    rc = main(["info", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_info_pte_json_fields(committed, capsys):
    rc, out, _ = _info(capsys, committed["mlp_portable"].pte, "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["format"] == "pte" and data["path"] == committed["mlp_portable"].pte
    (m,) = data["methods"]
    assert m["name"] == "forward"
    assert m["num_instructions"] == 6
    assert m["operators"] == ["aten::permute_copy.out", "aten::addmm.out", "aten::relu.out", "aten::add.out"]
    assert m["operator_calls"] == {"aten::permute_copy.out": 2, "aten::addmm.out": 2, "aten::relu.out": 1,
                                   "aten::add.out": 1}
    assert m["delegates"] == []
    assert m["by_category"]["param"] >= 4 and m["by_category"]["output"] == 1
    assert data["constant_data_size"] > 0 and data["num_segments"] == 1
    # the generic per-graph part every reader's summary has
    assert data["graphs"]["forward"]["operators"]["aten.addmm.out"] == 2


def test_info_pte_json_delegates(committed, capsys):
    rc, out, _ = _info(capsys, committed["mlp_xnnpack"].pte, "--json")
    assert rc == 0
    (m,) = json.loads(out)["methods"]
    assert m["operators"] == [] and m["num_instructions"] == 1
    (d,) = m["delegates"]
    assert d["backend_id"] == "XnnpackBackend"
    assert d["payload_size"] > 0 and d["location"] == "SEGMENT"
    assert d["ops"] == ["XNNFullyConnected", "XNNFullyConnected", "XNNAdd"]
    assert m["delegates_by_backend"] == {"XnnpackBackend": {"count": 1, "payload_size": d["payload_size"]}}


def test_info_pte_text(committed, capsys):
    rc, out, _ = _info(capsys, committed["mlp_xnnpack"].pte)
    assert rc == 0
    assert "ExecuTorch program (.pte)" in out
    assert "method forward: 1 instructions (1 DelegateCall)" in out
    assert "XnnpackBackend" in out and "3 ops: XNNFullyConnected ×2, XNNAdd" in out
    rc, out, _ = _info(capsys, committed["mlp_portable"].pte)
    assert "aten::addmm.out" in out and "×2" in out


def test_info_all_fixture_cases(artifacts, capsys):
    for case in artifacts.values():
        rc, out, _ = _info(capsys, case.pte, "--json")
        assert rc == 0
        data = json.loads(out)
        assert data["methods"][0]["num_instructions"] >= 1
        backends = {d["backend_id"] for d in data["methods"][0]["delegates"]}
        assert backends == ({"XnnpackBackend"} if "xnnpack" in case.name else set())


def test_info_writes_file(committed, tmp_path, capsys):
    out = tmp_path / "info.json"
    rc, stdout, _ = _info(capsys, committed["mlp_xnnpack"].pte, "--json", "-o", str(out))
    assert rc == 0 and stdout == ""
    assert json.loads(out.read_text())["format"] == "pte"


@pytest.mark.parametrize("kind", ["etrecord", "etdump", "pt2"])
def test_info_is_generic(committed, capsys, kind):
    """Every reader's summary prints through the same command; a reader that fails to import is a failure."""
    import importlib

    from etlens.readers import sniff

    spec = sniff(getattr(committed["mlp_xnnpack"], kind))
    importlib.import_module(spec.loader.split(":")[0])  # raises (fails the test) when the reader is broken
    rc, out, err = _info(capsys, getattr(committed["mlp_xnnpack"], kind), "--json")
    assert rc == 0, err
    assert json.loads(out)["format"] == spec.format
    rc, out, _ = _info(capsys, getattr(committed["mlp_xnnpack"], kind))
    assert rc == 0 and out.strip()


def test_info_errors_are_one_line(tmp_path, capsys):
    rc, out, err = _info(capsys, str(tmp_path / "missing.pte"))
    assert rc == 1 and "missing.pte" in err + out and "Traceback" not in err
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"\x10\0\0\0ET12" + b"\xff" * 40)
    rc, out, err = _info(capsys, str(bad))
    assert rc == 1 and "bad.pte" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1

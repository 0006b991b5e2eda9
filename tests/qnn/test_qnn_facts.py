"""Compile facts and fallback reasons of real QNN programs, read without ExecuTorch or QNN."""

from __future__ import annotations

import pytest

from etlens.backends.qnn.payload import decode_qnn
from etlens.errors import FormatError

from .conftest import run_json

#: one worker builds the corpus while the other goes on (``--dist loadgroup``), instead of waiting on its lock
pytestmark = pytest.mark.xdist_group("qnn")


@pytest.mark.parametrize("case,precision,profile", [("cnn_fp16", "fp16", 2), ("cnn_int8", "int8", 2),
                                                    ("dump_int8", "int8", 0), ("block_fp16", "fp16", 2)])
def test_info_decodes_the_compile_spec_and_payload(qnn_corpus, tmp_path, case, precision, profile):
    code, doc = run_json(["info", str(qnn_corpus / f"{case}.pte")], tmp_path / "info.json")
    assert code == 0
    delegates = [d for m in doc["methods"] for d in m["delegates"]]
    assert delegates and all(d["backend_id"] == "QnnBackend" for d in delegates)
    q = delegates[0]["qnn"]
    assert (q["soc_model"], q["htp_arch"], q["precision"], q["profile_level"]) == ("SM8650", "V75", precision, profile)
    assert 0 < q["context_binary_bytes"] < delegates[0]["payload_size"]
    assert q["qnn_build"].startswith("v2.51")
    assert q["dump_intermediate_outputs"] is case.startswith("dump")
    assert any("convolution" in op or "linear" in op for op in q["op_names"])


def test_payload_errors_name_the_problem():
    with pytest.raises(FormatError, match="magic"):
        decode_qnn(b"\x00" * 64, name="x")
    with pytest.raises(FormatError, match="truncated"):
        decode_qnn(bytes.fromhex("cdab7856") + b"\x00" * 8 + (1 << 20).to_bytes(4, "little") + b"\x00" * 16)


def test_every_cpu_node_has_the_partitioners_reason(qnn_corpus, manifest, tmp_path):
    code, doc = run_json(["delegation", str(qnn_corpus / "fallback_fp16.etrecord")], tmp_path / "d.json")
    assert code == 0
    nodes = {n["name"]: n for n in doc["nodes"]}
    built = manifest["cases"]["fallback_fp16"]
    assert {c["name"] for c in built["cpu_nodes"]} <= {n for n, v in nodes.items() if v["backend"] is None}
    for n in nodes.values():
        assert (n["backend"] is None) == ("reason" in n)
        assert n["backend"] in (None, "QnnBackend")
    # the same words the QNN partitioner logged while lowering
    for line in built["partitioner_log"]:
        op, _, words = line.split("] ", 1)[1].partition(" | ")
        if "unsupported" in words:
            hit = [n for n in nodes.values() if n["target"] == op]
            assert hit and words in hit[0]["reason"]
    assert nodes["aten_convolution_default"]["module_path"] == "conv1"


def test_fully_delegated_program_has_no_cpu_op(qnn_corpus, tmp_path):
    code, doc = run_json(["delegation", str(qnn_corpus / "cnn_int8.etrecord")], tmp_path / "d.json")
    cpu = [n for n in doc["nodes"] if n["backend"] is None and n["target"] != "getitem"]
    assert cpu == []

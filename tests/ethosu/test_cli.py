"""The Ethos-U contract through the command line: memory/size/info/delegation/model-explorer on real builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from etlens.backends.ethosu.vela import read_sidecar


def _etlens(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "etlens", *args], capture_output=True, text=True, timeout=600)


def test_memory_json_and_budget_gates(ethosu_small):
    case = ethosu_small["cnn@ethos-u55-128"]
    p = _etlens("memory", case.pte, "--format", "json")
    assert p.returncode == 0, p.stderr
    eu = json.loads(p.stdout)["ethos_u"]
    vela = read_sidecar(case.vela).totals()
    assert eu["sram_bytes"] == vela["sram_bytes"] and eu["flash_bytes"] == vela["flash_bytes"]
    assert eu["vela"]["sram_bytes"] == vela["sram_bytes"]
    # the fast scratch is not in the payload: it comes from Vela's raw output kept in the sidecar (0 in
    # the U55's Shared_Sram mode), and the payload's scratch is the scratch Vela wrote there
    sc = read_sidecar(case.vela)
    assert eu["fast_scratch_bytes"] == 0 and eu["delegates"][0]["fast_scratch_bytes"] == 0
    assert eu["delegates"][0]["scratch_bytes"] == sc.partitions[0].memory["scratch_bytes"]
    need_sram, need_flash = eu["sram_with_arena_bytes"], eu["flash_with_command_stream_bytes"]
    assert _etlens("memory", case.pte, "--fail-on-sram-bytes", str(need_sram)).returncode == 0
    p = _etlens("memory", case.pte, "--fail-on-sram-bytes", str(need_sram - 1))
    assert p.returncode == 3 and "gate failed" in p.stderr and "SRAM" in p.stderr
    p = _etlens("memory", case.pte, "--fail-on-flash-bytes", str(need_flash - 1))
    assert p.returncode == 3 and "flash" in p.stderr
    assert _etlens("memory", case.pte, "--fail-on-flash-bytes", str(need_flash)).returncode == 0
    text = _etlens("memory", case.pte).stdout
    assert "Ethos-U (ethos-u55-128)" in text and "Vela's summary" in text and "fast scratch 0 B" in text


def test_memory_gate_on_a_program_without_ethos_u(committed):
    p = _etlens("memory", committed["mlp_xnnpack"].pte, "--fail-on-sram-bytes", "10")
    assert p.returncode == 1 and "no EthosUBackend delegate" in p.stderr


def test_size_and_info_show_the_payload(ethosu_small):
    case = ethosu_small["cnn@ethos-u85-256"]
    parts = json.loads(_etlens("size", case.pte, "--format", "json").stdout)
    kinds = parts["by_kind"]
    eu = json.loads(_etlens("memory", case.pte, "--format", "json").stdout)["ethos_u"]
    assert kinds["ethos_u_weights"] == eu["flash_bytes"]
    assert kinds["ethos_u_command_stream"] == eu["command_stream_bytes"]
    assert sum(p["bytes"] for p in parts["parts"]) == os.path.getsize(case.pte)
    info = _etlens("info", case.pte).stdout
    assert "EthosUBackend" in info and "command stream" in info and "in 3x16x16 -> out 10" in info


def test_delegation_nodes_contract(ethosu_small):
    for case in ethosu_small.values():
        p = _etlens("delegation", case.etrecord, "--format", "json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        eu = doc["ethos_u"]
        for key in ("npu_cycles", "sram_bytes", "flash_bytes", "npu_ops", "cpu_ops"):
            assert eu[key] is not None, key
        nodes = doc["nodes"]
        assert sum(n.get("npu_cycles") or 0 for n in nodes) == eu["npu_cycles"]
        assert all(n["reason"] for n in nodes if n["backend"] is None)
        assert all(n["npu_cycles"] is not None for n in nodes if n["backend"] is not None)
        assert {n["name"] for n in nodes if n["backend"] is None} >= {"aten_argmax_default"}
        text = _etlens("delegation", case.etrecord).stdout
        assert "Vela's estimate" in text and "layout changes on the NPU" in text


def test_model_explorer_gets_an_npu_cycles_overlay(ethosu_small, tmp_path):
    case = ethosu_small["cnn@ethos-u55-128"]
    p = _etlens("model-explorer", case.etrecord, "-o", str(tmp_path / "g.json"))
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "g.npu_cycles.nodedata.json").read_text())
    (graph,) = data.values()
    assert graph["results"]["aten_convolution_default"]["value"] > 0

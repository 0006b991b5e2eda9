"""Vela's per-layer estimates mapped to ATen nodes: coverage, sums, fallback reasons, layout cost."""

from __future__ import annotations

import pytest

from etlens.backends.ethosu.delegation import ethos_u_delegation
from etlens.backends.ethosu.memory import ethos_u_memory
from etlens.readers.pte import read
from etlens.backends.ethosu.vela import parse_per_layer_csv, read_sidecar


def _check(case, *, min_by_name: float = 0.0) -> dict:
    d = ethos_u_delegation(case.etrecord)
    t = d.totals()
    sc = read_sidecar(case.vela)
    # Vela's totals are the sidecar's summaries, and the per-layer rows add up to them
    assert t["npu_cycles"] == sum(p.summary.cycles_total for p in sc.partitions) > 0
    assert sum(row.cycles for p in sc.partitions for row in p.layers) == pytest.approx(t["npu_cycles"], rel=1e-9)
    # every row is charged to an ATen node, and the per-node estimates sum to Vela's total (within 1%)
    assert t["layers_mapped"] == t["layers"] > 0, [(m.layer.name, m.how) for m in d.layers if m.node is None]
    assert t["node_cycles_sum"] == pytest.approx(t["npu_cycles"], rel=0.01)
    assert t["layers_by_name"] / t["layers"] >= min_by_name, [(m.layer.name, m.how) for m in d.layers]
    nodes = d.to_json()["nodes"]
    names = [n["name"] for n in nodes]
    assert len(names) == len(set(names))
    for n in nodes:
        assert {"name", "module_path", "backend"} <= set(n)
        if n["backend"] is None:
            assert n["reason"], n
        else:
            assert n["backend"] == "EthosUBackend" and n["npu_cycles"] is not None, n
    # the .pte's payload agrees with Vela's summary on SRAM and flash (within 10%; here exactly)
    mem = ethos_u_memory(read(case.pte))
    assert mem["sram_bytes"] == pytest.approx(t["sram_bytes"], rel=0.1)
    if mem["memory_mode"].startswith("Dedicated_Sram"):
        # U65: the SRAM is Vela's fast scratch (from the sidecar); the weights and the scratch go to DRAM
        assert mem["sram_bytes"] == mem["fast_scratch_bytes"] > 0 and t["flash_bytes"] == 0
        assert mem["flash_bytes"] + mem["dram_bytes"] == pytest.approx(t["dram_bytes"], rel=0.1)
    else:
        assert mem["flash_bytes"] == pytest.approx(t["flash_bytes"], rel=0.1)
        assert mem["fast_scratch_bytes"] == 0 and mem["dram_bytes"] == 0
    # several partitions: each delegate matches its own Vela compile; cycles and flash add up, SRAM is the
    # largest partition's (each delegate's scratch lives only during its call)
    parts = d.sidecar.partitions
    ok = [x for x in mem["delegates"] if "decode_error" not in x]
    assert mem["partitions"] == len(parts) == len(ok)
    if not mem["memory_mode"].startswith("Dedicated_Sram"):
        assert [x["scratch_bytes"] for x in ok] == [p.summary.sram_bytes for p in parts]
        assert [x["flash_bytes"] for x in ok] == [p.summary.flash_bytes for p in parts]
        assert mem["sram_bytes"] == max(p.summary.sram_bytes for p in parts) == t["sram_bytes"]
        assert mem["sram_bytes_sum"] == sum(p.summary.sram_bytes for p in parts) == t["sram_bytes_sum"]
        assert mem["flash_bytes"] == sum(p.summary.flash_bytes for p in parts)
    assert t["npu_cycles"] == sum(p.summary.cycles_total for p in parts)
    return d.to_json()


def test_cnn_nodes_and_totals(ethosu_small):
    for key, case in ethosu_small.items():
        j = _check(case, min_by_name=0.9)
        by = {n["name"]: n for n in j["nodes"]}
        # the convolutions carry most of the cycles, under their modules
        assert by["aten_convolution_default"]["module_path"] == "c1"
        assert by["aten_convolution_default"]["npu_cycles"] > 0.3 * j["ethos_u"]["npu_cycles"], key
        assert by["aten_linear_default"]["module_path"] == "fc" and by["aten_linear_default"]["npu_cycles"] > 0
        # argmax stays on the CPU with the Arm backend's own reason
        assert by["aten_argmax_default"]["backend"] is None
        assert "ARGMAX" in by["aten_argmax_default"]["reason"]
        assert j["ethos_u"]["cpu_ops"] == 0 and j["ethos_u"]["npu_ops"] >= 9
        # layout changes (transposes NCHW <-> NHWC) are called out with their cycles
        assert j["ethos_u"]["layout_cycles"] > 0


def test_old_vela_csv_dialect():
    """The older Python compiler's CSV repeats 'Network%' and says 'SRAM Usage' / 'Util%'."""
    text = ("Original Operator,NNG Operator,SRAM Usage,Peak%,Op Cycles,Network%,NPU,SRAM AC,DRAM AC,OnFlash AC,"
            "OffFlash AC,MAC Count,Network%,Util%,Name\n"
            "CONV_2D,Conv2DBias,1024,50.0,300,75.0,280,20,0,0,10,4096,90.0,12.5,conv_out\n"
            "ADD,Add,512,25.0,100,25.0,90,5,0,0,0,0,10.0,0.0,add_out\n")
    rows = parse_per_layer_csv(text)
    assert [(r.name, r.op, r.cycles, r.macs, r.staging_bytes, r.utilization_pct) for r in rows] == [
        ("conv_out", "Conv2DBias", 300.0, 4096.0, 1024.0, 12.5), ("add_out", "Add", 100.0, 0.0, 512.0, 0.0)]


@pytest.mark.corpus
def test_corpus(ethosu_small, ethosu_corpus):
    """Every corpus model (the CNN from the small fixture; the transformer block on the U55 only):
    >= 95% of Vela rows charged to an ATen node, sums within 1%, SRAM/flash from the .pte within 10% of
    Vela's summary, every CPU node with a reason."""
    seen = set()
    cases = {**ethosu_small, **ethosu_corpus}
    assert {c.target for c in cases.values()} == {"ethos-u55-128", "ethos-u65-256", "ethos-u85-256"}
    for case in cases.values():
        j = _check(case)
        seen.add(case.model)
        cpu = {n["name"]: n["reason"] for n in j["nodes"] if n["backend"] is None}
        if case.model == "transformer":
            # sort and argmax stay on the CPU, each with the partitioner's reason
            assert any("sort" in n for n in cpu) and any("argmax" in n for n in cpu), cpu
    assert seen == {"cnn", "ds_cnn", "mobilenet", "resnet", "transformer"}

"""get_delegation_info / format_delegated_graph against ExecuTorch itself, on real lowered programs.

Fully delegated (mlp, cnn), partially delegated (mixed: cumsum falls back) and quantized (cnn_q8),
from memory (GraphModule, ExportedProgram, EdgeProgramManager), from the ETRecord and from the .pte.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import requires_executorch
from tests.analysis.delegation.delegation_lowering import XNN_CASES, lowered

from etlens.analysis.delegation import (
    DelegationInfo,
    format_delegated_graph,
    get_delegation_info,
    print_delegated_graph,
)

pytestmark = requires_executorch


def _et_info(gm):
    from executorch.devtools.backend_debug import get_delegation_info as et_get

    return et_get(gm)


def _assert_same(mine: DelegationInfo, ref) -> None:
    assert mine.get_summary() == ref.get_summary()
    assert (mine.num_delegated_subgraphs, mine.num_delegated_nodes, mine.num_non_delegated_nodes) == (
        ref.num_delegated_subgraphs, ref.num_delegated_nodes, ref.num_non_delegated_nodes)
    assert {k: (v.op_type, v.delegated, v.non_delegated) for k, v in mine.delegation_by_operator.items()} == {
        k: (v.op_type, v.delegated, v.non_delegated) for k, v in ref.delegation_by_operator.items()}
    pd.testing.assert_frame_equal(mine.get_operator_delegation_dataframe(), ref.get_operator_delegation_dataframe())


@pytest.mark.parametrize("case", XNN_CASES)
@pytest.mark.parametrize("form", ["graph_module", "exported_program", "edge_manager"])
def test_in_memory_equals_executorch(case, form):
    edge = lowered(case)
    ep = edge.exported_program()
    obj = {"graph_module": ep.graph_module, "exported_program": ep, "edge_manager": edge}[form]
    _assert_same(get_delegation_info(obj), _et_info(ep.graph_module))


@pytest.mark.parametrize("case", XNN_CASES)
def test_etrecord_lowered_view_equals_executorch_on_the_lowered_program(case, artifacts):
    # The ETRecord stores the edge program before partitioning; etlens rebuilds the lowered view
    # from the record's delegate/debug-handle maps and must agree with ExecuTorch on the real thing.
    ref = _et_info(lowered(case).exported_program().graph_module)
    _assert_same(get_delegation_info(artifacts[case].etrecord), ref)


@pytest.mark.parametrize("case", ["mixed_xnnpack", "cnn_xnnpack"])
def test_etrecord_recorded_view_equals_executorch_on_the_record(case, artifacts):
    from executorch.devtools.etrecord import parse_etrecord

    recorded = parse_etrecord(artifacts[case].etrecord).edge_dialect_program
    ref = _et_info(recorded.graph_module)
    assert ref.num_delegated_subgraphs == 0  # what ExecuTorch itself says about an ETRecord
    _assert_same(get_delegation_info(artifacts[case].etrecord, etrecord_view="recorded"), ref)


def test_after_to_executorch_equals_executorch(artifacts):
    # to_executorch rewrites the edge program in place (alloc nodes, out variants): still equal
    import copy

    edge = copy.deepcopy(lowered("mixed_xnnpack"))
    edge.to_executorch()
    gm = edge.exported_program().graph_module
    ref = _et_info(gm)
    assert "alloc" in ref.delegation_by_operator
    _assert_same(get_delegation_info(gm), ref)


@pytest.mark.parametrize("case", ["mixed_xnnpack", "cnn_q8_xnnpack"])
def test_format_delegated_graph_equals_executorch(case, capsys):
    from executorch.exir.backend.utils import format_delegated_graph as et_format

    gm = lowered(case).exported_program().graph_module
    assert format_delegated_graph(gm) == et_format(gm)
    assert format_delegated_graph(lowered(case)) == et_format(gm)
    print_delegated_graph(gm)
    assert capsys.readouterr().out == et_format(gm) + "\n"
    compact = format_delegated_graph(gm, compact=True)
    assert compact.count("backend_id: XnnpackBackend") == et_format(gm).count("backend_id: XnnpackBackend")
    assert max(map(len, compact.splitlines())) < max(map(len, et_format(gm).splitlines()))


def test_format_delegated_graph_from_etrecord_expands_each_delegate(artifacts):
    text = format_delegated_graph(artifacts["mixed_xnnpack"].etrecord)
    assert text.count("backend_id: XnnpackBackend") == 2
    assert text.count("lowered graph():") == 2
    lines = text.splitlines()
    # the fallback sits at top level between the two delegates, reading the first one's getitem
    cumsum = next(line for line in lines if "aten_cumsum_default = " in line)
    assert cumsum.startswith("  %") and "%getitem" in cumsum
    inner = [line for line in lines if line.startswith("      %aten_") and " = aten." in line]
    assert [line.split(" = ")[0].strip() for line in inner] == [
        "%aten_linear_default", "%aten_relu_default", "%aten_linear_default_1", "%aten_sin_default",
        "%aten_linear_default_2"]


def test_pte_counts_backend_ops_and_kernel_calls(artifacts):
    info = get_delegation_info(artifacts["mixed_xnnpack"].pte)
    ref = _et_info(lowered("mixed_xnnpack").exported_program().graph_module)
    assert info.num_delegated_subgraphs == ref.num_delegated_subgraphs == 2
    table = info.get_operator_delegation_dataframe()
    table["op_type"] = table["op_type"].str.removeprefix("XNN")  # reader spelling: XNNSin or Sin
    table = table.set_index("op_type")
    assert table.loc["aten_cumsum_out", "occurrences_in_non_delegated_graphs"] == 1
    # XNNPACK fused linear+relu into one fully-connected node: 3 FC + 1 sin
    assert table.loc["FullyConnected", "occurrences_in_delegated_graphs"] == 3
    assert table.loc["Sin", "occurrences_in_delegated_graphs"] == 1
    assert "getitem" not in table.index
    assert any("from a .pte" in n for n in info.notes)
    assert {s["contents"] for s in info.subgraphs} <= {"backend_ops", "backend_graph"}


def test_extras_backends_shares_and_fallbacks(artifacts):
    info = get_delegation_info(artifacts["mixed_xnnpack"].etrecord)
    assert info.backends == {"XnnpackBackend": {"subgraphs": 2, "delegated_nodes": 5, "operators": {
        "aten_linear_default": 3, "aten_relu_default": 1, "aten_sin_default": 1}}}
    assert info.delegated_share == pytest.approx(5 / 8)
    share = info.get_share_dataframe().set_index("op_type")["delegated_share"]
    assert share["aten_cumsum_default"] == 0.0 and share["aten_linear_default"] == 1.0
    assert share["Total"] == pytest.approx(0.625)
    assert [n.name for n in info.non_delegated if n.op_type != "getitem"] == ["aten_cumsum_default"]
    data = info.to_dict()
    assert {"num_delegated_subgraphs", "num_delegated_nodes", "num_non_delegated_nodes", "operators"} <= set(data)
    report = info.format_report()
    assert "XnnpackBackend: 2 subgraph(s), 5 node(s)" in report and "aten_cumsum_default" in report


def test_partitioner_reasons_for_fallbacks():
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    class M(torch.nn.Module):
        def forward(self, x, w):
            a = torch.nn.functional.linear(x, w)  # weight is an input: XNNPACK wants a static param
            return torch.cumsum(a, -1)            # no XNNPACK config at all

    ep = torch.export.export(M(), (torch.randn(4, 4), torch.randn(4, 4)))
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    info = get_delegation_info(edge, partitioner=XnnpackPartitioner())
    reasons = info.reasons
    assert "static param" in reasons["aten_mm_default"] or "static param" in reasons.get("aten_linear_default", "")
    assert reasons["aten_cumsum_default"] == "XnnpackPartitioner has no support config for cumsum.default"
    # without the in-memory program there is nothing to ask: said so, not silently empty
    gm_info = get_delegation_info(edge.exported_program().graph_module, partitioner=XnnpackPartitioner())
    assert "aten_cumsum_default" not in gm_info.reasons
    assert any("partitioner reasons need" in n for n in gm_info.notes)


def test_partitioner_reasons_on_mixed_demo():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    info = get_delegation_info(lowered("mixed_xnnpack"), partitioner=[XnnpackPartitioner()])
    assert "no support config for cumsum.default" in info.reasons["aten_cumsum_default"]
    assert info.reasons["getitem"].startswith("not an operator")


def test_partitioner_reasons_from_etrecord_match_in_memory(artifacts, capsys):
    # an ETRecord keeps the edge program the partitioner saw: the same question gets the same answer
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    from etlens.cli.main import main

    from_file = get_delegation_info(artifacts["mixed_xnnpack"].etrecord, partitioner=XnnpackPartitioner())
    in_memory = get_delegation_info(lowered("mixed_xnnpack"), partitioner=XnnpackPartitioner())
    assert from_file.reasons["aten_cumsum_default"] == in_memory.reasons["aten_cumsum_default"]
    assert main(["delegation", artifacts["mixed_xnnpack"].etrecord, "--why", "xnnpack"]) == 0
    assert "no support config for cumsum.default" in capsys.readouterr().out

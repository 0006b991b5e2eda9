"""The per-operator latency table's op types, including ExecuTorch's truncated lists."""

from __future__ import annotations

from etlens.report.collect import op_types_text


def test_truncated_delegate_list_reads_back_into_names():
    # what executorch.devtools.Inspector.to_dataframe puts in "op_types" for a delegate of 37 ops
    cell = ["['aten.convolution.default', 'aten.relu.default' ... 'aten.add.Tensor'] (37 total)"]
    assert op_types_text(cell) == "aten.convolution.default, aten.relu.default, …, aten.add.Tensor (37 ops)"
    assert op_types_text(cell[0]) == op_types_text(cell)


def test_short_lists_and_empty_cells():
    assert op_types_text(["aten.mm.default", "aten.add.Tensor"]) == "aten.mm.default, aten.add.Tensor"
    assert op_types_text([]) == "" and op_types_text(None) == "" and op_types_text(float("nan")) == ""

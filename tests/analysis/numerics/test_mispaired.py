"""Rows where ExecuTorch's positional rule pairs a delegate's tensor with the wrong reference op.

ConvNeXt (fp32, XNNPACK): a delegate covering ``permute -> conv2d -> permute`` returns two tensors, and
ExecuTorch's rule (output ``i`` from the end = handle ``-(i+1)``) compares the first permute's output with
the conv's, so ExecuTorch's table shows MSE ~1 on an exact fp32 program. etlens pairs each delegate output
with the node that returns it (the partition's boundary in the edge program, ``delegate_outputs="graph"``,
the default), and every row is float rounding. With ExecuTorch's rule (``delegate_outputs="executorch"``)
:meth:`NumericalAnalysis.mispaired` still finds the wrong rows (the runtime tensor equals another op of the
group to float rounding) and the report keeps them out of its headline.
"""

from __future__ import annotations

import pytest

from tests.conftest import requires_executorch


@pytest.fixture(scope="module")
def convnext(tmp_path_factory):
    from tests.analysis.numerics._et import lowered_corpus_model

    return lowered_corpus_model(tmp_path_factory, "convnext")


@requires_executorch
def test_mispaired_rows_are_found(convnext):
    import etlens
    from etlens.analysis.numerics import analyze

    insp = etlens.Inspector(etdump_path=convnext.etdump, etrecord=convnext.etrecord,
                            debug_buffer_path=convnext.debug_buffer)
    analysis = analyze(insp, delegate_outputs="executorch")
    table = analysis.gap_table("MSE")
    suspects = analysis.mispaired()
    assert suspects, table[["aot_ops", "gap"]].to_string()
    for i, s in suspects.items():
        assert table.gap.iloc[i][0] > 1e-3            # the row ExecuTorch's rule makes is far off ...
        assert s["equals_relative_mse"] < 1e-10         # ... and the tensor is exactly another op's output
        assert s["op"] in table.aot_ops.iloc[i] and s["equals"] in table.aot_ops.iloc[i] and s["op"] != s["equals"]
    # every other row of an fp32 program is float rounding
    rest = [max(g) for i, g in enumerate(table.gap) if i not in suspects]
    assert rest and max(rest) < 1e-9


@requires_executorch
def test_delegate_output_map_pairs_every_row_exactly(convnext):
    """The default pairing: the rows ExecuTorch's rule gets wrong become exact, the others stay the same."""
    import etlens
    from etlens.analysis.numerics import analyze

    insp = etlens.Inspector(etdump_path=convnext.etdump, etrecord=convnext.etrecord,
                            debug_buffer_path=convnext.debug_buffer)
    positional = analyze(insp, delegate_outputs="executorch")
    graph = analyze(insp)
    old, new = positional.gap_table("MSE"), graph.gap_table("MSE")
    assert max(max(g) for g in old.gap) > 1e-3
    assert len(new) >= len(old) and max(max(g) for g in new.gap) < 1e-9
    assert not graph.mispaired()
    remapped = [i for i, info in enumerate(graph.paired.info) if info.runtime_choice == "delegate output map"]
    assert remapped  # the map changed at least the mispaired rows ...
    changed = {i for i, g in enumerate(old.gap) if g[0] > 1e-3}
    kept = [i for i in range(len(old)) if i not in changed]
    for i in kept:  # ... and the rows ExecuTorch gets right are still there
        key = (tuple(old.aot_debug_handle.iloc[i]), tuple(old.runtime_debug_handle.iloc[i]), old.gap.iloc[i][0])
        assert any((tuple(new.aot_debug_handle.iloc[j]), tuple(new.runtime_debug_handle.iloc[j]),
                    new.gap.iloc[j][0]) == key for j in range(len(new))), i


@requires_executorch
def test_report_headline_leaves_mispaired_rows_out(convnext):
    from etlens.report.collect import ReportInputs, collect

    data = collect(ReportInputs(etdump=convnext.etdump, etrecord=convnext.etrecord,
                                debug_buffer=convnext.debug_buffer))
    worst, _ = data.worst_gap
    assert worst < 1e-9 and data.divergence is None
    # the delegate output map pairs the rows ExecuTorch's rule gets wrong: nothing left to flag
    assert not any("wrong reference op" in n for n in data.notes), data.notes
    assert max(max(g) for g in data.gap_df.gap) < 1e-9

"""Rows where ExecuTorch's positional rule pairs a delegate's tensor with the wrong reference op.

ConvNeXt (fp32, XNNPACK): a delegate covering ``permute -> conv2d -> permute`` logs the first permute's
output, and the rule compares it with the conv's, so ExecuTorch's table (and etlens', which equals it)
shows MSE ~1 on an exact fp32 program. :meth:`NumericalAnalysis.mispaired` finds those rows (the runtime
tensor equals another op of the group to float rounding); the report keeps them out of its headline.
"""

from __future__ import annotations

import pytest

from tests.conftest import requires_executorch


@pytest.fixture(scope="module")
def convnext(tmp_path_factory):
    from tests.analysis.numerics._et import lowered_artifacts
    from tests.corpus.models import build

    model, inputs = build("convnext")
    return lowered_artifacts(tmp_path_factory.mktemp("convnext"), model, inputs, "xnnpack")


@requires_executorch
def test_mispaired_rows_are_found(convnext):
    import etlens
    from etlens.analysis.numerics import analyze

    insp = etlens.Inspector(etdump_path=convnext.etdump, etrecord=convnext.etrecord,
                            debug_buffer_path=convnext.debug_buffer)
    analysis = analyze(insp)
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
def test_report_headline_leaves_mispaired_rows_out(convnext):
    from etlens.report.collect import ReportInputs, collect

    data = collect(ReportInputs(etdump=convnext.etdump, etrecord=convnext.etrecord,
                                debug_buffer=convnext.debug_buffer))
    worst, _ = data.worst_gap
    assert worst < 1e-9 and data.divergence is None
    assert any("wrong reference op" in n and "conv2d" in n for n in data.notes), data.notes
    assert max(max(g) for g in data.gap_df.gap) > 1e-3   # the table itself stays ExecuTorch's

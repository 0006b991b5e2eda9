"""Recurrent models: each output of a delegate call is paired with the node that returns it.

ExecuTorch's LSTM example (``executorch.examples.models.lstm``, fp32, XNNPACK) is exact end to end
(1e-15), but ExecuTorch's positional rule (output ``i`` from the end = handle ``-(i+1)``) pairs an
XNNPACK partition's ``(c, h, gates)`` outputs with the wrong reference ops: MSE up to 0.18, a ``(5, 3,
20)`` stacked sequence broadcast against a ``(3, 20)`` state, and a "first divergence" at ``stack``.
etlens reads each partition's outputs from the edge program (its boundary, in graph order), never
compares tensors of different sizes, and reports what it cannot pair by shape as ``shape_mismatch``.
"""

from __future__ import annotations

import pytest

from tests.conftest import requires_executorch


# -- the pairing rule on hand-made data (no ExecuTorch needed) -----------------------------------------
def _graph():
    """An fx graph with debug handles: ``a(1) -> b(2) -> c(3)``, ``a`` and ``c`` used outside {1, 2, 3}."""
    import torch

    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.relu, (x,))
    b = g.call_function(torch.neg, (a,))
    c = g.call_function(torch.sigmoid, (b,))
    d = g.call_function(torch.add, (a, c))
    for n, h in ((a, 1), (b, 2), (c, 3), (d, 4)):
        n.meta["debug_handle"] = h
    g.output((d,))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_delegate_outputs_are_the_partition_boundary_in_graph_order():
    from etlens.analysis.numerics.delegates import DelegateOutputs

    outs = DelegateOutputs.from_fx(_graph())
    assert outs.output_handles((2, 1, 3)) == [1, 3]      # b is read only inside the partition
    assert outs.output_handles((1, 2, 3, 4)) == [4]      # the program's output
    assert outs.output_handles((2,)) == [2]
    assert outs.output_handles((1, 99)) is None          # a handle this program does not have


def test_pairing_follows_the_delegate_output_map():
    """A delegate returning ``(a, c)`` logs ``[x, a, c]``; ExecuTorch's rule gives output 1 handle 2 (``b``)."""
    import torch

    from etlens.analysis.numerics.delegates import DelegateOutputs
    from etlens.analysis.numerics.match import pair_outputs

    a, b, c = torch.ones(3), torch.full((3,), 2.0), torch.full((3,), 3.0)
    aot = {(1,): a, (2,): b, (3,): c}
    runtime = {(1, 2, 3): ([torch.zeros(3), a.clone(), c.clone()], 2)}
    positional = pair_outputs(aot, runtime)
    picked = {info.aot_handle: v for info, (_, v) in zip(positional.info, positional.mapping.values())}
    assert torch.equal(picked[(2,)], a)                  # ExecuTorch's rule: b's reference against a
    mapped = pair_outputs(aot, runtime, DelegateOutputs.from_fx(_graph()).output_handles)
    picked = {info.aot_handle: v for info, (_, v) in zip(mapped.info, mapped.mapping.values())}
    assert set(picked) == {(1,), (3,)}
    assert torch.equal(picked[(1,)], a) and torch.equal(picked[(3,)], c)
    assert {i.runtime_choice for i in mapped.info} == {"delegate output map", "position"}


def test_map_with_other_sizes_than_the_logged_tensors_is_not_used():
    import torch

    from etlens.analysis.numerics.match import pair_outputs

    aot = {(1,): torch.ones(3), (2,): torch.ones(4), (3,): torch.ones(5)}
    runtime = {(1, 2, 3): ([torch.ones(4), torch.ones(5)], 2)}
    res = pair_outputs(aot, runtime, lambda h: [1, 3])   # (1,) has 3 elements, the first output 4
    assert [i.runtime_choice for i in res.info] == ["position", "position"]


# -- ExecuTorch's LSTM example, lowered and run by the real toolchain ------------------------------------
@pytest.fixture(scope="module")
def lstm_example(tmp_path_factory):
    from tests.analysis.numerics._et import lowered_artifacts
    from tests.corpus.models import build

    model, inputs = build("lstm_example")
    assert isinstance(inputs[1], tuple)  # (x, (h0, c0)): nested, as the example gives them
    return lowered_artifacts(tmp_path_factory.mktemp("lstm_example"), model, inputs, "xnnpack")


def _inspector(art):
    import etlens

    return etlens.Inspector(etdump_path=art.etdump, etrecord=art.etrecord, debug_buffer_path=art.debug_buffer)


def _sizes(df):
    return [(r.aot_intermediate_output.numel(), r.runtime_intermediate_output.numel()) for r in df.itertuples()]


@pytest.mark.slow
@requires_executorch
def test_lstm_example_rows_are_exact(lstm_example):
    from etlens.analysis.numerics import analyze, first_divergence

    insp = _inspector(lstm_example)
    table = insp.calculate_numeric_gap("MSE")
    assert len(table) >= 40                                # every step's cell state, hidden state, gates
    worst = max(max(g) for g in table.gap)
    assert worst < 1e-9, table[["aot_ops", "gap"]].to_string()
    assert all(a == b for a, b in _sizes(table))
    assert first_divergence(insp, threshold=1e-9) is None
    remapped = [i for i in analyze(insp).paired.info if i.runtime_choice == "delegate output map"]
    assert len(remapped) >= 10                             # two per recurrent step at least


@pytest.mark.slow
@requires_executorch
def test_lstm_example_positional_rule_is_what_went_wrong(lstm_example):
    """ExecuTorch's rule (kept as ``delegate_outputs="executorch"``): wrong rows, but never two sizes in one row."""
    from etlens.analysis.numerics import analyze

    insp = _inspector(lstm_example)
    positional = analyze(insp, delegate_outputs="executorch")
    table = positional.gap_table("MSE")
    assert max(max(g) for g in table.gap) > 1e-3           # h compared with c: what the map fixes
    assert all(a == b for a, b in _sizes(table))           # (5, 3, 20) vs (3, 20) is not a row ...
    explained = positional.explain_unpaired()
    mismatch = explained[explained.reason == "shape_mismatch"]
    assert len(mismatch) and any("5, 3, 20" in d and "3, 20" in d for d in mismatch.detail)  # ... but a reason
    # the rows ExecuTorch's rule gets right are the same under both rules
    exact = analyze(insp).gap_table("MSE")
    keys = {(tuple(r.aot_debug_handle), tuple(r.runtime_debug_handle), r.gap[0]) for r in exact.itertuples()}
    right = [r for r in table.itertuples() if r.gap[0] < 1e-9]
    assert right and all((tuple(r.aot_debug_handle), tuple(r.runtime_debug_handle), r.gap[0]) in keys for r in right)


@pytest.mark.slow
@requires_executorch
def test_lstm_example_gap_cli_has_no_divergence(lstm_example, capsys):
    from etlens.cli.main import main

    code = main(["gap", "--etdump", lstm_example.etdump, "--etrecord", lstm_example.etrecord,
                 "--debug-buffer", lstm_example.debug_buffer, "--metric", "MSE", "--threshold", "1e-9"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "first divergence" not in out


# -- torch.nn.GRU: the whole layer is one ATen op returning (output, h_n) --------------------------------
@pytest.fixture(scope="module")
def gru(tmp_path_factory):
    from tests.analysis.numerics._et import lowered_corpus_model

    return lowered_corpus_model(tmp_path_factory, "gru")


@pytest.mark.slow
@requires_executorch
def test_gru_layer_is_one_multi_output_row(gru):
    """ExecuTorch raises on this program (IndexError); etlens skips the op by default, as ExecuTorch's table
    does, compares both tensors with ``multi_output=True``, and the report falls back to that table."""
    from etlens.report.collect import ReportInputs, collect

    insp = _inspector(gru)
    assert len(insp.calculate_numeric_gap("MSE")) == 0
    table = insp.calculate_numeric_gap("MSE", multi_output=True)
    assert len(table) == 1 and list(table.aot_ops.iloc[0]) == ["gru"]
    ref, rt = table.aot_intermediate_output.iloc[0], table.runtime_intermediate_output.iloc[0]
    assert [tuple(t.shape) for t in ref] == [tuple(t.shape) for t in rt] == [(2, 4, 8), (2, 2, 8)]
    assert len(table.gap.iloc[0]) == 2 and max(table.gap.iloc[0]) < 1e-9
    data = collect(ReportInputs(etdump=gru.etdump, etrecord=gru.etrecord, debug_buffer=gru.debug_buffer))
    assert len(data.gap_df) == 1 and data.worst_gap[0] < 1e-9 and data.divergence is None
    assert any("several tensors" in n for n in data.notes), data.notes

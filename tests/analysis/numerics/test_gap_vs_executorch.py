"""calculate_numeric_gap rows equal ExecuTorch's on real artifacts (MSE, L1, SNR)."""

from __future__ import annotations

import pytest

from tests.analysis.numerics._et import CASES, ET_WORKS, assert_same_rows

pytestmark = pytest.mark.executorch


@pytest.mark.parametrize("case", ET_WORKS)
@pytest.mark.parametrize("metric", ["MSE", "L1", "SNR"])
def test_rows_equal_executorch(both, case, metric):
    et, ours = both(case)
    assert_same_rows(et.calculate_numeric_gap(metric), ours.calculate_numeric_gap(metric))


@pytest.mark.parametrize("case", ["mlp_portable", "mixed_xnnpack", "cnn_q8_xnnpack"])
def test_edge_reference_equals_executorch(both, case):
    et, ours = both(case)
    kw = {"reference_graph": "edge_dialect_exported_program"}
    assert_same_rows(et.calculate_numeric_gap("MSE", **kw), ours.calculate_numeric_gap("MSE", **kw))


def test_json_runner_is_used_and_matches_deserialized_program(both):
    """The fast path (reference run straight from the JSON) gives the deserialized program's rows."""
    from etlens.analysis.numerics.capture import capture_reference, resolve_reference
    from etlens.analysis.numerics.jsonrun import JsonProgram

    _, ours = both("transformer_portable")
    record = ours._etrecord
    fast = resolve_reference(record)
    slow = resolve_reference(record, fast=False)
    assert isinstance(fast.program, JsonProgram) and not isinstance(slow.program, JsonProgram)
    # the deserialized graph has getitem nodes the JSON does not (they are never captured)
    assert fast.handles == {k: v for k, v in slow.handles.items() if "getitem" not in k}
    from etlens.analysis.numerics.inputs import reference_inputs
    from etlens.analysis.record import as_record

    inputs, _ = reference_inputs(as_record(record))
    a, b = capture_reference(fast, inputs), capture_reference(slow, inputs)
    assert list(a.outputs) == list(b.outputs)
    assert a.op_names == b.op_names
    import torch

    for k in a.outputs:
        x, y = a.outputs[k], b.outputs[k]
        xs, ys = (x, y) if isinstance(x, list) else ([x], [y])
        for u, v in zip(xs, ys):
            assert torch.equal(u, v), k


def test_both_spellings_of_validation_flag(both):
    et, ours = both("mixed_xnnpack")
    ref = et.calculate_numeric_gap("MSE", disable_debug_handle_valdiation=True)
    assert_same_rows(ref, ours.calculate_numeric_gap("MSE", disable_debug_handle_valdiation=True))
    assert_same_rows(ref, ours.calculate_numeric_gap("MSE", disable_debug_handle_validation=True))


@pytest.mark.parametrize("case", ["transformer_portable", "cnn_xnnpack"])
def test_keep_compared_outputs_only_gives_same_table(both, case):
    from etlens.analysis import numerics

    _, ours = both(case)
    full = numerics.calculate_numeric_gap(ours, "MSE")
    lean = numerics.calculate_numeric_gap(ours, "MSE", keep_outputs="compared")
    assert_same_rows(full, lean)
    a = numerics.analyze(ours, keep_outputs="compared")
    b = numerics.analyze(ours)
    assert len(a.capture.outputs) <= len(b.capture.outputs)
    if case == "transformer_portable":  # the free reshape (handle 3) has no runtime event: not kept
        assert (3,) in b.capture.outputs and (3,) not in a.capture.outputs


def test_executorch_inspector_host_works_too(both):
    """numerics accepts ExecuTorch's own Inspector object (duck typing) and gives its rows."""
    from etlens.analysis import numerics

    et, _ = both("mlp_portable")
    ref = et.calculate_numeric_gap("L1")
    assert_same_rows(ref, numerics.calculate_numeric_gap(et, "L1"))


def test_transformer_executorch_bug_shapes(both):
    """ExecuTorch raises on the transformer: the runtime logs the (1, 8, 4, 8) clone before a free
    view where the reference has (1, 8, 32). etlens compares them element by element; with a custom
    comparator doing the same inside ExecuTorch, ExecuTorch's own rows equal ours."""
    import torch
    from executorch.devtools.inspector.numerical_comparator import NumericalComparatorBase as ETBase

    et, ours = both("transformer_portable")
    with pytest.raises(ValueError, match="size of tensor"):
        et.calculate_numeric_gap("MSE")

    class ReshapingMSE(ETBase):
        def element_compare(self, a, b):
            a = torch.as_tensor(a, dtype=torch.float64)
            b = torch.as_tensor(b, dtype=torch.float64)
            if a.shape != b.shape and a.numel() == b.numel():
                b = b.reshape(a.shape)
            return float(torch.mean(torch.square(a - b)))

    ref = et.calculate_numeric_gap(ReshapingMSE())
    df = ours.calculate_numeric_gap("MSE")
    assert_same_rows(ref, df)
    row = [i for i, h in enumerate(df.aot_debug_handle) if tuple(h) == (12,)][0]
    assert tuple(df.runtime_intermediate_output[row].shape) == (1, 8, 4, 8)
    assert tuple(df.aot_intermediate_output[row].shape) == (1, 8, 32)


@pytest.mark.parametrize("case", CASES)
def test_extra_metrics_have_a_row_per_group(both, case):
    _, ours = both(case)
    mse = ours.calculate_numeric_gap("MSE")
    for metric in ("cosine", "max_abs"):
        df = ours.calculate_numeric_gap(metric)
        assert len(df) == len(mse)
        for g in df.gap:
            assert all(isinstance(x, float) for x in g)
    cos = ours.calculate_numeric_gap("cosine")
    assert all(0.999 < g[0] <= 1.0 + 1e-12 for g in cos.gap)  # fp32 runtime vs reference: near-identical


def test_custom_comparator_with_preprocessing(both):
    from etlens.analysis.comparators import NumericalComparatorBase, to_float64

    _, ours = both("mixed_xnnpack")

    class Shifted(NumericalComparatorBase):
        def preprocessing(self, mapping):
            return {k: (h, v + 1.0) for k, (h, v) in mapping.items()}

        def element_compare(self, a, b):
            return float((to_float64(b) - to_float64(a)).mean())

    cmp = Shifted()
    df = ours.calculate_numeric_gap(cmp)
    assert cmp.inspector is ours
    assert len(df) == 3 and all(abs(g[0] - 1.0) < 1e-6 for g in df.gap)


def test_executorch_comparator_instance_is_accepted(both):
    from executorch.devtools.inspector.numerical_comparator import SNRComparator as ETSNR

    et, ours = both("cnn_xnnpack")
    assert_same_rows(et.calculate_numeric_gap("SNR"), ours.calculate_numeric_gap(ETSNR()))

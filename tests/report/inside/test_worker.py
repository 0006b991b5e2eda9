"""The inside view's native work: one worker child for many cycles, errors mapped back to exposures."""

from __future__ import annotations

import os
import signal

import pytest

from etlens.errors import EtlensError
from etlens.passes.runner import NativeStageError, NativeWorker
from etlens.report.inside.engine import _named_in_error
from etlens.report.inside.graph import Exposure
from tests.conftest import requires_executorch


def _exp(node: str, index: int) -> Exposure:
    return Exposure(node=node, ops=[node], targets=[], float_node=node, output_index=index)


def test_backend_error_names_the_exposure_exactly():
    """XNNPACK names the refused node by its edge name; the worker's record maps it to the output."""
    outputs = [{"name": "getitem_2", "target": "getitem", "args": ["x"]},
               {"name": "quantized_decomposed_dequantize_per_tensor_default_13", "args":
                ["quantized_decomposed_quantize_per_tensor_default_7"],
                "target": "quantized_decomposed.dequantize_per_tensor.default"},
               {"name": "aten__softmax_default", "target": "aten._softmax.default", "args": ["aten_mul_tensor"]}]
    exps = [_exp("add", 1), _exp("softmax", 2)]
    q = NativeStageError("lower failed: RuntimeError: Output node 'quantized_decomposed_quantize_per_tensor_default_7'"
                         " is already in the inputs.", {"outputs": outputs})
    assert _named_in_error(q, exps) == [exps[0]]
    s = NativeStageError("lower failed: RuntimeError: Output node 'aten__softmax_default' is already in the inputs.",
                         {"outputs": outputs})
    assert _named_in_error(s, exps) == [exps[1]]
    # renumbered inside the delegate's subgraph: matched by base name when only one exposure has it
    s1 = NativeStageError("Output node 'aten__softmax_default_3' is already in the inputs.", {"outputs": outputs})
    assert _named_in_error(s1, exps) == [exps[1]]
    two = outputs + [{"name": "aten__softmax_default_1", "target": "aten._softmax.default", "args": []}]
    assert _named_in_error(NativeStageError("Output node 'aten__softmax_default_3' …", {"outputs": two}),
                           exps + [_exp("softmax_1", 3)]) == []  # ambiguous: halving
    # a node that is no exposure's output, or no record: nothing named (the caller splits in halves)
    assert _named_in_error(NativeStageError("Output node 'aten_mul_tensor' …", {"outputs": outputs}), exps) == []
    assert _named_in_error(EtlensError("Output node 'aten__softmax_default'"), exps) == []


@requires_executorch
@pytest.mark.slow
def test_worker_survives_errors_and_crashes(tmp_path):
    import torch

    from etlens.demos import get_demo

    model, inputs = get_demo("mlp")
    torch.export.save(torch.export.export(model.eval(), inputs), tmp_path / "a.pt2")
    with NativeWorker() as worker:
        outs, info = worker.lower_and_run(str(tmp_path / "a.pt2"), inputs, describe=True)
        torch.testing.assert_close(outs[0], model(*inputs), rtol=1e-4, atol=1e-5)
        assert info["outputs"][0]["backend"] == "XnnpackBackend"
        pid = worker._proc.pid
        with pytest.raises(NativeStageError, match="lower failed: MissingDataError: .*missing.pt2: no such file"):
            worker.lower_and_run(str(tmp_path / "missing.pt2"), inputs)
        worker.lower_and_run(str(tmp_path / "a.pt2"), inputs)
        assert worker._proc.pid == pid  # a Python error does not cost a new child
        os.kill(pid, signal.SIGKILL)  # as a native abort would
        with pytest.raises(NativeStageError, match="crashed in its child process"):
            worker.lower_and_run(str(tmp_path / "a.pt2"), inputs)
        outs, _ = worker.lower_and_run(str(tmp_path / "a.pt2"), inputs)  # a fresh child
        assert worker._proc.pid != pid and worker.jobs == 5

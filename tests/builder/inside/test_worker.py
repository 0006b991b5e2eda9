"""The inside view's native work: one worker child for many cycles, errors mapped back to exposures."""

from __future__ import annotations

import os
import signal

import pytest

from etlens.errors import EtlensError
from etlens.builder.worker import NativeStageError, Worker
from etlens.builder.inside.engine import _named_in_error
from etlens.builder.inside.graph import Exposure
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


def test_a_name_pointing_at_an_innocent_value_is_checked_and_taken_back(monkeypatch):
    """int8 ViT: XNNPACK's passes renumber the subgraph, so the refused node's name can be another
    exposure's. The build without that exposure fails naming the same node: it comes back, the
    exposures are halved, and only the real culprit is listed as unexposed."""
    from etlens.builder.inside import engine

    monkeypatch.setattr(engine, "instrument", lambda src, exposures: (list(exposures), 0))
    exps = [_exp(n, i) for i, n in enumerate(["conv", "cat", "add", "layer_norm", "linear", "gelu"])]
    culprit, innocent = exps[2], exps[4]
    builds: list[list[str]] = []

    def cycles(gm, label):
        builds.append([e.node for e in gm])
        if culprit in gm:  # the refusal always names 'q_8'; the record gives that name to linear's output
            outputs = [{"name": "q_8" if e is innocent else f"q_{e.node}", "target": "quantize", "args": []}
                       for e in exps]
            raise NativeStageError("lower failed: RuntimeError: Output node 'q_8' is already in the inputs.",
                                   {"outputs": outputs})
        return [], []

    failed: list[dict] = []
    done = engine._build(cycles, None, exps, failed)
    assert [f["node"] for f in failed] == ["add"] and failed[0]["identified"] == "alone"
    exposed = [e.node for b in done for e in b[0]]
    assert sorted(exposed) == sorted(e.node for e in exps if e is not culprit)
    assert builds[1] == [e.node for e in exps if e is not innocent]  # the name was tried first, then checked
    # a name that points at the right value: the next build works and nothing comes back
    failed, builds[:] = [], []
    culprit, innocent = exps[4], exps[4]
    done = engine._build(cycles, None, exps, failed)
    assert [f["node"] for f in failed] == ["linear"] and failed[0]["identified"] == "named by the error"
    assert len(builds) == 2


@requires_executorch
@pytest.mark.slow
def test_worker_survives_errors_and_crashes(tmp_path):
    import torch

    from etlens.demos import get_demo

    model, inputs = get_demo("mlp")
    torch.export.save(torch.export.export(model.eval(), inputs), tmp_path / "a.pt2")
    pt2, pte = str(tmp_path / "a.pt2"), str(tmp_path / "a.pte")
    with Worker() as worker:
        info = worker.lower(pt2, pte, describe=True)
        outs = worker.run(pte, inputs)
        torch.testing.assert_close(outs[0], model(*inputs), rtol=1e-4, atol=1e-5)
        assert info["outputs"][0]["backend"] == "XnnpackBackend"
        pid = worker.pid
        with pytest.raises(NativeStageError, match="lower failed: MissingDataError: .*missing.pt2: no such file"):
            worker.lower(str(tmp_path / "missing.pt2"), pte)
        worker.run(pte, inputs)
        assert worker.pid == pid  # a Python error does not cost a new child
        os.kill(pid, signal.SIGKILL)  # as a native abort would
        with pytest.raises(NativeStageError, match="crashed in its child process"):
            worker.run(pte, inputs)
        outs = worker.run(pte, inputs)  # a fresh child
        assert worker.pid != pid and worker.jobs == 6 and worker.children == 2
        assert worker.by_job == {"lower": 2, "run": 4}
        assert "aten::add.out" in worker.list_operators()

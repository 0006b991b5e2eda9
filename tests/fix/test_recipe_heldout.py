"""Recipes on held-out culprit models, applied with each toolchain's own quantizer and a plain module filter.

For every case ``fix_model`` (PyTorch only: rank, simulate, write) writes the recipe; the test then
applies the *file* without etlens, the way docs/fix.md shows: XNNPACK's ``set_filter_function``, Arm's
``EthosUQuantizer.set_module_name(path, None)``, Qualcomm's ``QnnQuantizer.add_discard_nodes``, and
runs the pt2e QDQ graph. The recipe must recover >= 90% of the output MSE that keeping the true
culprits in float recovers (the planted module, with its consumer when that takes less error: an
activation culprit; under the Arm and Qualcomm quantizers, which quantize a GELU's input too, with the
activation module between them), within the float budget. The XNNPACK runtime side is in
test_recipe_apply.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")

from culprits import make_case  # noqa: E402

from etlens.analysis.fix.consumers import budget_cost  # noqa: E402


def test_apply_calls_are_python_for_every_toolchain():
    """The ``apply`` block of every toolchain compiles and names its quantizer's own call."""
    from etlens.builder.recipe_apply import how_to_apply, how_to_apply_all

    HOW_TO_APPLY = how_to_apply_all()
    assert {"xnnpack", "portable", "qnn", "ethos-u55-128", "ethos-u85-256"} <= set(HOW_TO_APPLY)

    calls = {"filter": "set_filter_function", "module_name_none": "set_module_name(path, None)",
             "discard_nodes": "add_discard_nodes"}
    for name, how in HOW_TO_APPLY.items():
        compile(how["calls"], f"<{name}>", "exec")
        assert calls[how["method"]] in how["calls"], name
        assert "recipe.json" in how["calls"] and "keep_float" in how["calls"]
    assert "ethos-u85-256" in HOW_TO_APPLY["ethos-u85-256"]["calls"]
    generic = how_to_apply("cortex_m")
    compile(generic["calls"], "<generic>", "exec")
    assert generic["method"] == "unannotate"


def _quantize_node(keep):
    keep = set(keep)

    def quantize_node(node):
        stack = node.meta.get("nn_module_stack", {})
        return not keep & {path.removeprefix("L['self'].") for path, _ in stack.values()}

    return quantize_node


def _xnnpack(keep):
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    return q.set_filter_function(_quantize_node(keep))


def _arm(keep):
    from executorch.backends.arm.ethosu import EthosUCompileSpec
    from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config

    q = EthosUQuantizer(EthosUCompileSpec("ethos-u55-128")).set_global(get_symmetric_quantization_config())
    for path in keep:
        q.set_module_name(path, None)
    return q


def _mse(model, inputs, make_quantizer, keep, *, discard=False):
    """Output MSE of the pt2e QDQ graph quantized by ``make_quantizer(keep)`` (plain torch / torchao)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gm = torch.export.export(model, inputs).module(check_guards=False)
    q = make_quantizer(keep)
    if discard:
        q.add_discard_nodes([n.name for n in gm.graph.nodes if not _quantize_node(keep)(n)])
    prepared = prepare_pt2e(gm, q)
    prepared(*inputs)
    quantized = convert_pt2e(prepared)
    with torch.no_grad():
        return float(((quantized(*inputs) - model(*inputs)) ** 2).mean())


def _recipe(tmp_path, kind, seed, backend="xnnpack"):
    from etlens.analysis.fix import fix_model
    from etlens.builder.session import BuildSession

    model, inputs, culprits = make_case(kind, seed)
    with BuildSession(model, inputs, backend=backend, quantize=True) as s:
        res = fix_model(s, str(tmp_path), verify=False)
    doc = json.loads((tmp_path / "recipe.json").read_text())
    return model, inputs, culprits, res, doc


def _recovery(model, inputs, culprits, keep, make_quantizer, **kw):
    """(recovered share, truth set): the truth is the planted module alone or with the next module that
    takes its output (whichever removes more)."""
    base = _mse(model, inputs, make_quantizer, [], **kw)
    ours = _mse(model, inputs, make_quantizer, keep, **kw)
    truths = [list(culprits), list(culprits) + _activations_beside(model, culprits)]
    nxt = _next_module(culprits[0])
    if nxt and nxt not in culprits:
        truths.append(list(culprits) + [nxt])
    truth = min(_mse(model, inputs, make_quantizer, t, **kw) for t in truths)
    return (base - ours) / (base - truth), (base, ours, truth)


def _activations_beside(model, paths):
    """The weightless modules (a GELU) next to ``paths`` in their parent: what carries the culprit's output to
    its consumer."""
    out = []
    for p in paths:
        parent, _, _ = p.rpartition(".")
        for name, mod in model.get_submodule(parent).named_children():
            full = f"{parent}.{name}" if parent else name
            if not any(True for _ in mod.parameters()) and full not in out:
                out.append(full)
    return out


def _next_module(path):
    head, _, idx = path.rpartition(".")
    if not idx.isdigit():
        return None
    return f"{head}.{int(idx) + 1}"


@pytest.mark.slow
@pytest.mark.executorch
@pytest.mark.parametrize("case", ["block:1", "mlp:0", "mlp_act:1", "cnn:1"])  # one of each kind (CI time)
def test_heldout_recipe_with_xnnpack_filter(tmp_path, case):
    pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
    kind, seed = case.split(":")
    model, inputs, culprits, res, doc = _recipe(tmp_path, kind, int(seed))
    assert budget_cost(model, doc["keep_float"]) <= res.budget
    assert [m["path"] for m in doc["modules"]] == doc["keep_float"]
    share, mses = _recovery(model, inputs, culprits, doc["keep_float"], _xnnpack)
    assert share >= 0.9, (case, doc["keep_float"], mses)


@pytest.mark.slow
@pytest.mark.executorch
@pytest.mark.parametrize("seed", [0])  # block:1 measured too (100%); one per toolchain for CI time
def test_arm_quantizer_applies_the_recipe(tmp_path, seed):
    """Ethos-U: the recipe ``fix`` writes for the Arm quantizer, applied with ``set_module_name(path, None)``:
    the quantizer annotates the GELU, so the recipe keeps ``fc1``, the GELU module and ``fc2``."""
    pytest.importorskip("executorch.backends.arm.quantizer")
    model, inputs, culprits, res, doc = _recipe(tmp_path, "block", seed, backend="ethos-u55-128")
    assert doc["apply"]["method"] == "module_name_none" and "EthosUQuantizer" in doc["apply"]["calls"]
    assert set(culprits) <= set(doc["keep_float"]) and budget_cost(model, doc["keep_float"]) <= res.budget
    roles = {m["path"]: m["role"] for m in doc["modules"]}
    assert roles[culprits[0]] == "culprit" and roles[culprits[1]] == "consumer"
    share, mses = _recovery(model, inputs, culprits, doc["keep_float"], _arm)
    assert share >= 0.9, (doc["keep_float"], mses)


@pytest.mark.slow
@pytest.mark.executorch
@pytest.mark.parametrize("seed", [1])  # block:0 measured too (100%); one per toolchain for CI time
def test_qnn_quantizer_applies_the_recipe(tmp_path, seed):
    """Qualcomm: the recipe ``fix`` writes for QnnQuantizer, applied with ``add_discard_nodes`` on the
    exported graph's nodes under the listed modules (the recipe's own ``apply`` calls)."""
    qnn = pytest.importorskip("executorch.backends.qualcomm.quantizer.quantizer")
    model, inputs, culprits, res, doc = _recipe(tmp_path, "block", seed, backend="qnn-htp")
    assert doc["apply"]["method"] == "discard_nodes" and budget_cost(model, doc["keep_float"]) <= res.budget
    assert set(culprits) <= set(doc["keep_float"])
    share, mses = _recovery(model, inputs, culprits, doc["keep_float"], lambda _k: qnn.QnnQuantizer(), discard=True)
    assert share >= 0.9, (doc["keep_float"], mses)

"""A recipe file applied the way a user applies it: XNNPACK's own quantizer and a plain module filter, no etlens.

Two pre-LayerNorm transformer blocks (``culprits.make_case("block", 0)``): ``blocks.0.fc1`` emits a
massive activation channel that ``blocks.0.fc2`` ignores; the GELU between them runs in float, and
``fc2`` quantizes the tensor again at its input. ``fix_model`` (one PyTorch-only run shared by the
fast tests: rank, simulate, write) must write a recipe that lists ``fc2`` too, with what each keeps
in float and why.

The user's side uses only torch, torchao and ExecuTorch: read the JSON, build the filter from
``node.meta["nn_module_stack"]`` (the recipe's ``apply.calls``), ``XNNPACKQuantizer.set_filter_function``,
prepare / calibrate / convert, export, ``to_edge_transform_and_lower`` with ``XnnpackPartitioner``, run
on the ExecuTorch runtime (one lowering) and measure the output SNR: it must recover >= 90% (in output
MSE) of what keeping the true culprits in float recovers. The slow test runs ``fix_model`` with its
verification (2 lowerings) and checks that what it reports for the recipe is what the user's own
lowering measures. Measured: int8 15.2 dB; recipe ``[blocks.0.fc1, blocks.0.fc2]`` 36.7 dB.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

from culprits import make_case  # noqa: E402

pytestmark = pytest.mark.executorch


def _fix(out, verify):
    from etlens.analysis.fix import fix_model
    from etlens.builder.session import BuildSession

    model, inputs, culprits = make_case("block", 0)
    with BuildSession(model, inputs, backend="xnnpack", quantize=True) as s:
        res = fix_model(s, str(out), max_lowerings=2, runs=1, verify=verify)
    return res, out / "recipe.json", culprits


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    return _fix(tmp_path_factory.mktemp("fix-block"), verify=False)


def _plain_xnnpack(model, inputs, keep, *, lower: bool):
    """What a user writes (docs/fix.md, the recipe's apply.calls): no etlens import."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    keep = set(keep)

    def quantize_node(node):
        stack = node.meta.get("nn_module_stack", {})
        return not keep & {path.removeprefix("L['self'].") for path, _ in stack.values()}

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    quantizer.set_filter_function(quantize_node)
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    quantized = convert_pt2e(prepared)
    if not lower:
        with torch.no_grad():
            return quantized(*inputs)
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    edge = to_edge_transform_and_lower(torch.export.export(quantized, inputs), partitioner=[XnnpackPartitioner()])
    program = edge.to_executorch()
    return _load_for_executorch_from_buffer(program.buffer).forward(inputs)[0]


def _snr(out, ref):
    return 10 * math.log10(float((ref ** 2).sum() / ((out - ref) ** 2).sum()))


def test_recipe_lists_the_consumer_with_what_and_why(fixed):
    res, path, culprits = fixed
    doc = json.loads(path.read_text())
    assert doc["format"] == "etlens-recipe" and doc["version"] == 2
    assert doc["keep_float"] == culprits, doc["keep_float"]  # [blocks.0.fc1, blocks.0.fc2]
    assert len(doc["keep_float"]) <= res.budget
    mods = {m["path"]: m for m in doc["modules"]}
    assert mods["blocks.0.fc1"]["role"] == "culprit" and "introduced" in mods["blocks.0.fc1"]["why"]
    assert mods["blocks.0.fc1"]["keeps_float"] == ["weights", "input", "output"]
    fc2 = mods["blocks.0.fc2"]
    assert fc2["role"] == "consumer" and fc2["of"] == "blocks.0.fc1"
    assert {"weights", "input"} <= set(fc2["keeps_float"]) and "XNNPACK" in fc2["why"]
    assert doc["apply"]["quantizer"] == "XNNPACKQuantizer" and "set_filter_function" in doc["apply"]["calls"]
    assert doc["notes"]["simulated_snr_db"] > 30 and doc["notes"]["int8_snr_db"] < 20, doc["notes"]


@pytest.mark.slow
def test_written_recipe_applied_without_etlens(fixed):
    res, path, culprits = fixed
    model, inputs, _ = make_case("block", 0)
    doc = json.loads(path.read_text())
    with torch.no_grad():
        ref = model(*inputs)
    # the recipe's own calls, executed as a user's script would run them
    scope = {"torch": torch, "model": model, "inputs": inputs, "open": lambda *_a, **_k: open(path)}
    exec(doc["apply"]["calls"], scope)  # noqa: S102 - the snippet the recipe file ships
    with torch.no_grad():
        snippet = _snr(scope["quantized"](*inputs), ref)
    lowered = _snr(_plain_xnnpack(model, inputs, doc["keep_float"], lower=True), ref)
    int8 = _snr(_plain_xnnpack(model, inputs, [], lower=False), ref)
    truth = _snr(_plain_xnnpack(model, inputs, culprits, lower=False), ref)
    assert int8 < 20 and lowered > 30, (int8, lowered)
    assert _recovered(int8, lowered, truth) >= 0.9, (int8, lowered, truth)
    assert abs(snippet - doc["notes"]["simulated_snr_db"]) < 0.5, (snippet, doc["notes"])
    assert abs(snippet - lowered) < 3.0, (snippet, lowered)


def _recovered(int8_db, recipe_db, truth_db):
    """The share of the output MSE that keeping the true culprits in float removes, removed by the recipe."""
    def mse(db):
        return 10 ** (-db / 10)

    return (mse(int8_db) - mse(recipe_db)) / (mse(int8_db) - mse(truth_db))


@pytest.mark.slow
def test_fix_reports_what_the_user_gets(tmp_path):
    res, path, _ = _fix(tmp_path, verify=True)
    model, inputs, _ = make_case("block", 0)
    doc = json.loads(path.read_text())
    chosen = next(c for c in res.candidates if c.chosen)
    assert chosen.lowered and chosen.keep_float == doc["keep_float"], (chosen.keep_float, chosen.error)
    assert doc["notes"]["snr_db"] == pytest.approx(chosen.snr_db)
    with torch.no_grad():
        ref = model(*inputs)
    lowered = _snr(_plain_xnnpack(model, inputs, doc["keep_float"], lower=True), ref)
    assert abs(lowered - chosen.snr_db) < 0.5, (lowered, chosen.snr_db)

"""``etlens fix`` end to end, exactly as the contract calls it, on the 20-layer culprit MLP.

Real toolchain: the int8 build and the chosen candidate are lowered to XNNPACK and run on the
ExecuTorch runtime in the session's worker child. Checked: OUT.json's top culprit is the planted
layer, with introduced / accumulated errors; every candidate has keep_float, snr_db, latency_ms,
pte_bytes; RECIPE.json keeps at most 2 modules, removes at least 90% of the error (output MSE) that
keeping the true culprit removes (measured on the pt2e graph), the fix took at most 5 lowerings, and
``etlens report --quantize --recipe`` applies the recipe.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")

from culprits import make_case, write_model_file  # noqa: E402

pytestmark = [pytest.mark.executorch]


def _mse(model, inputs, ep, keep):
    from etlens.builder.quantize import quantize_pt2e
    from etlens.builder.recipe import recipe_quantizer

    q = quantize_pt2e(model, inputs, "xnnpack", exported=ep, quantizer=recipe_quantizer("xnnpack", keep))
    with torch.no_grad():
        return float(((q(*inputs) - ep.module()(*inputs)) ** 2).mean())


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_fix_contract(tmp_path, seed):
    from etlens.cli.main import main

    model_py = write_model_file(str(tmp_path / "model.py"), "mlp", seed)
    out, recipe = tmp_path / "out.json", tmp_path / "recipe.json"
    code = main(["fix", "--model", f"{model_py}:build", "--quantize", "--format", "json", "-o", str(out),
                 "--recipe-out", str(recipe)])
    assert code == 0
    doc = json.loads(out.read_text())
    model, inputs, culprits = make_case("mlp", seed)
    top = doc["culprits"][0]
    assert top["module_path"] == culprits[0]
    assert top["introduced"] > 0 and top["accumulated"] is not None
    assert doc["lowerings"] <= 5
    for c in doc["candidates"]:
        assert {"keep_float", "snr_db", "latency_ms", "pte_bytes"} <= set(c)
        assert c["pte_bytes"] > 0 and c["latency_ms"] > 0
    rdoc = json.loads(recipe.read_text())
    keep = rdoc["keep_float"]
    # seed 0: a weight culprit; seed 1: an activation culprit, listed with its consumer (the next layer)
    c = int(culprits[0].split(".")[1])
    true_set = culprits if seed == 0 else [culprits[0], f"layers.{c + 1}"]
    assert set(culprits) <= set(keep) and len(keep) <= doc["budget"], keep
    assert [m["path"] for m in rdoc["modules"]] == keep and all(m["why"] for m in rdoc["modules"])
    ep = torch.export.export(model, inputs)
    base, ours, truth = (_mse(model, inputs, ep, k) for k in ([], keep, true_set))
    assert base - ours >= 0.9 * (base - truth), (base, ours, truth)
    chosen = next(c for c in doc["candidates"] if c["chosen"])
    int8 = next(c for c in doc["candidates"] if not c["keep_float"])
    assert chosen["mse"] <= int8["mse"]  # measured on the runtime, not only simulated
    if seed == 0:  # the recipe applies in report
        html = tmp_path / "r.html"
        code = main(["report", "--model", f"{model_py}:build", "--quantize", "--recipe", str(recipe), "-o",
                     str(html), "--no-trace", "--no-inside-delegates", "--runs", "1"])
        assert code == 0 and html.exists()


def test_fix_needs_quantize(tmp_path, capsys):
    from etlens.cli.main import main

    model_py = write_model_file(str(tmp_path / "model.py"), "mlp", 0)
    assert main(["fix", "--model", f"{model_py}:build"]) == 1
    assert "--quantize" in capsys.readouterr().err

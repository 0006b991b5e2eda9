"""The introduced-error column of ``etlens gap --model … --quantize`` (introduced vs accumulated).

The 6-layer activation-culprit MLP (tests/fix/culprits.py, ``mlp_act``): ``layers.2`` emits one
channel near 1000 that ``layers.3`` ignores. Its own output is well represented (the accumulated
gap at it is small: the outlier dominates its signal), the damage shows at ``layers.3`` and after:
the accumulated gap puts the first divergence at ``layers.3``, the introduced column ranks
``layers.2`` first. Fast checks run the PyTorch side on real pt2e graphs; the slow one runs the CLI
(lower + run on XNNPACK, measured 40 CPU-s).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")

from culprits import make_case, write_model_file  # noqa: E402


@pytest.fixture(scope="module")
def clusters():
    from etlens.analysis.numerics.introduced import introduced_errors
    from etlens.builder.quantize import quantize_pt2e

    model, inputs, culprits = make_case("mlp_act", 0)
    ep = torch.export.export(model, inputs)
    qm = quantize_pt2e(model, inputs, "xnnpack", exported=ep)
    return introduced_errors(ep.module(), qm, inputs), culprits


def test_rows_get_their_clusters_introduced_error(clusters):
    from etlens.analysis.numerics.introduced import attach_introduced
    from etlens.builder.inside.result import InsideResult

    rows_c, culprits = clusters
    by_path = {c.module_path: c for c in rows_c}
    # gap rows as the inside-delegates analysis names them: the compute nodes of the quantized graph
    rows = [{"aot_ops": list(c.nodes), "module_path": c.module_path, "gap": 1.0} for c in rows_c]
    rows.append({"aot_ops": ["some_float_op"], "module_path": "", "gap": 0.0})
    assert attach_introduced(rows, rows_c) == len(rows_c)
    assert rows[-1]["introduced"] is None and rows[-1]["introduced_rank"] is None
    top = min((r for r in rows if r["introduced_rank"]), key=lambda r: r["introduced_rank"])
    assert top["module_path"] == culprits[0] and top["introduced_rank"] == 1
    for r in rows[:-1]:
        assert r["introduced"] == by_path[r["module_path"]].introduced
    # the culprit's own output looks healthy (accumulated), the one after it does not
    assert by_path["layers.2"].accumulated < 1e-3 < by_path["layers.3"].accumulated
    text = InsideResult("SNR", None, "xnnpack", True, rows=rows).to_text()
    assert "introduced (NSR)" in text.splitlines()[2]


def test_absent_without_quantize_or_when_skipped():
    from etlens.cli._gap_inside import _introduced, _introduced_text

    res = SimpleNamespace(rows=[])
    intro = _introduced(SimpleNamespace(quantize=False, introduced=True), None, res)
    assert intro["available"] is False and "--quantize" in intro["why"]
    intro = _introduced(SimpleNamespace(quantize=True, introduced=False), None, res)
    assert intro["available"] is False and "--no-introduced" in intro["why"]
    assert "not computed" in _introduced_text(intro)


@pytest.mark.slow
@pytest.mark.executorch
def test_gap_cli_introduced_column(tmp_path):
    from etlens.cli.main import main

    model_py = write_model_file(str(tmp_path / "model.py"), "mlp_act", 0)
    out = tmp_path / "gap.json"
    code = main(["gap", "--model", f"{model_py}:build", "--quantize", "--metric", "SNR", "--fail-on-gap", "20",
                 "--format", "json", "-o", str(out)])
    assert code == 3  # the accumulated gap crosses 20 dB downstream of the culprit
    doc = json.loads(out.read_text())
    assert doc["introduced"]["available"] and doc["introduced"]["top"]["module_path"] == "layers.2"
    assert doc["first_divergence"]["module_path"] == "layers.3"  # accumulated: where it shows
    rows = {r["module_path"]: r for r in doc["rows"] if r.get("module_path")}
    assert rows["layers.2"]["introduced_rank"] == 1  # introduced: where it is done
    assert rows["layers.2"]["introduced"] > 10 * rows["layers.3"]["introduced"]
    assert all("introduced" in r for r in doc["rows"])


def test_fix_overlay_is_model_explorer_node_data(clusters, tmp_path):
    from etlens.cli.fix import _overlay, _write_json
    from etlens.views.model_explorer import load_node_values

    rows_c, _ = clusters
    path = str(tmp_path / "introduced.json")
    _write_json(path, _overlay(rows_c))
    values = load_node_values(path)  # what `etlens model-explorer … --node-data introduced=FILE` reads
    assert values["linear_2"] == values["relu_2"] == rows_c[0].introduced
    assert max(values, key=values.get) in rows_c[0].nodes
    assert len(values) == sum(len(c.nodes) for c in rows_c)

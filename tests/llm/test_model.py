"""ExecuTorch's custom LLM ops in every process: ``etlens.builder.oplibs``, ``report --model``, ``--inside-delegates``.

The models are ``tests/llm/models.py``: the Llama Transformer of ExecuTorch's own
``examples/models/llama`` with the ``-kv --use_sdpa_with_kv_cache`` source transforms
(``llama::update_cache`` / ``llama::custom_sdpa``), fp32 and 8da4w. Lowering and running happen in
etlens' child processes, which must load the op libraries themselves (the parent's imports do not
reach them).
"""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import requires_executorch


@pytest.mark.xdist_group("llm")  # reads the LLM corpus: built on the worker of tests/llm/test_llm.py
def test_oplibs_decides_from_every_spelling(llm_corpus, tmp_path):
    """The namespace decides, whatever the spelling; real .pte and ETRecord files are read for their ops."""
    from etlens.builder import oplibs

    llama = "executorch.extension.llm.custom_ops.custom_ops"
    assert oplibs.libraries_for(["llama::update_cache.out"]) == [llama]
    assert oplibs.libraries_for(["torch.ops.llama.custom_sdpa.default", "aten::add", "_operator.ge"]) == [llama]
    assert oplibs.libraries_for(["executorch.exir.dialects.edge.ops.torchao.quantize_affine.default",
                                 "quantized_decomposed::quantize_per_tensor.out"]) == [
        "executorch.kernels.quantized", "torchao"]
    assert oplibs.libraries_for(["aten::mul", "executorch_prim::add", "aten.add.Tensor"]) == []
    fp32 = llm_corpus["fp32_dynamic"]
    assert oplibs.libraries_for(oplibs.op_names(fp32.pte)) == [llama]  # the .pte's operator table
    # the ETRecord's serialized programs (a zip, scanned before anything is deserialized)
    assert oplibs.libraries_for(oplibs.op_names(fp32.etrecord)) == [llama]
    assert oplibs.load_for(["aten::add"]) == []

    from etlens.errors import BackendUnavailableError

    with pytest.raises(BackendUnavailableError, match="needed by nope::op"):
        oplibs.load(["etlens_no_such_library"], why={"etlens_no_such_library": "nope::op"})
    # a .pt2 calling an operator no library registers: the child's one-line error names it and the fix
    import zipfile

    pt2 = tmp_path / "custom.pt2"
    with zipfile.ZipFile(pt2, "w") as z:
        z.writestr("custom/models/model.json", '{"target": "torch.ops.etlens_nope.my_op.default"}')
    with pytest.raises(BackendUnavailableError, match="etlens_nope::my_op.*ETLENS_OP_LIBRARIES"):
        oplibs.load_for(str(pt2))


@pytest.mark.slow
@pytest.mark.xdist_group("llm")
def test_oplibs_reads_the_8da4w_etrecord(llm_corpus):
    """The 8da4w export's ETRecord calls torchao's affine quantization ops too: both libraries are named."""
    from etlens.builder import oplibs

    q = llm_corpus["q8da4w_dynamic"]
    assert oplibs.libraries_for(oplibs.op_names(q.etrecord)) == ["executorch.extension.llm.custom_ops.custom_ops",
                                                                  "torchao"]


@requires_executorch
def test_report_model_with_llama_custom_ops(tmp_path, capsys):
    """``report --model`` on a module calling llama::update_cache / custom_sdpa: lowered and run in children."""
    from etlens.cli.main import main

    out = tmp_path / "llama.html"
    code = main(["report", "--model", "tests/llm/models.py:tiny_llama", "--runs", "2", "--no-trace",
                 "--no-inside-delegates", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert out.exists() and "worst MSE gap" in captured.out
    html = out.read_text()
    assert "custom_sdpa" in html and "update_cache" in html


@pytest.mark.slow
@requires_executorch
def test_inside_delegates_on_8da4w_llama():
    """Per-op values inside XNNPACK for the 8da4w Llama: computed by the backend, paired with the torch model."""
    from etlens.builder.inside import inside_delegates
    from tests.llm.models import tiny_llama_8da4w_1layer

    model, inputs = tiny_llama_8da4w_1layer()
    res = inside_delegates(model, inputs, backend="xnnpack", quantize=False, metric="SNR", threshold=10)
    doc = json.loads(json.dumps(res.to_dict(), default=str))
    inside = [r for r in doc["rows"] if r["inside_delegate"]]
    assert len(inside) >= 8, doc["method"]
    # quantization bookkeeping (fused into XNNPACK's GEMM) and KV-cache writes are no rows
    assert not any(op.startswith(("choose_qparams", "quantize_affine", "dequantize_affine", "update_cache"))
                   for r in doc["rows"] for op in r["aot_ops"])
    assert any("linear" in " ".join(r["aot_ops"]) for r in inside)
    # the XNNPACK 8da4w kernels agree with torchao's simulation in torch (both int8 x int4): high SNR
    snrs = [float(r["gap"]) for r in inside if r["gap"] is not None and not math.isnan(float(r["gap"]))]
    assert snrs and min(snrs) > 15, snrs
    assert doc["observer_effect"]["identical"] is not False

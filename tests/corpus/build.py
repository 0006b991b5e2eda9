"""Build one corpus case the way ``etlens report --model`` does, and record what ExecuTorch says about it.

``python tests/corpus/build.py OUT_DIR ARCH CONFIG`` (CONFIG: ``fp32-xnnpack``, ``int8-xnnpack``,
``fp32-portable``) writes ``OUT_DIR/ARCH-CONFIG/``: the report (``report.html`` and its side files,
``report_artifacts/`` with the ``.pte``, ETRecord, ETDump, debug buffer and pass trace), ``plain/``
(the same model through plain ExecuTorch APIs: ``.pte``, ETRecord, ETDump, debug buffer) and
``result.json``: build time, whether it worked, the error when not, and ExecuTorch's own
``get_delegation_info`` on the lowered program in memory (summary and per-operator table), which the
tests compare with etlens' answer from the ETRecord.

Each case runs in its own process (the tests start it), so a crash of one build cannot take the
test session down and independent builds run in parallel under pytest-xdist.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

#: the cases whose build also runs the plain flow to the end (``.pte``, ETRecord, runs with ETDump) for
#: test_report_content_equals_plain_flow: fp32 and int8 cases of each family, sized to the CI budget (every
#: other delegated case lowers plainly only for the delegation reference). Not the recurrent cases: this
#: plain flow hands the runtime the nested ``(x, (h0, c0))`` as given, which it rejects (a user flattens
#: first); tests/passes/test_nested_inputs.py covers them
CONTENT_CASES = ("bert:fp32-xnnpack", "gpt2:fp32-xnnpack", "resnet:fp32-xnnpack",
                 "bert:int8-xnnpack", "resnet:int8-xnnpack", "vit:int8-xnnpack")

CONFIGS = {
    "fp32-xnnpack": dict(backend="xnnpack", quantize=False, trace=True),
    "int8-xnnpack": dict(backend="xnnpack", quantize=True, trace=True),
    "fp32-portable": dict(backend="portable", quantize=False, trace=False),
}


def _record_delegation(result: dict):
    """Keep ExecuTorch's delegation info of the lowered program, taken right after lowering.

    ``to_executorch`` later rewrites the same program in place (memory planning adds ``alloc``
    nodes), so the reference is computed inside ``to_edge_transform_and_lower``'s return. Only a call
    that passes ``partitioner=`` is the lowering: the pass tracer also calls it without one to show the edge
    graph, and that program has no delegates at all (recording it gave "0 delegated subgraphs").
    """
    import executorch.exir as exir

    original = exir.to_edge_transform_and_lower

    def lowered(*args, **kwargs):
        edge = original(*args, **kwargs)
        if "partitioner" not in kwargs:  # the tracer's edge-only call (portable passes an empty list)
            return edge
        from executorch.devtools.backend_debug import get_delegation_info

        info = get_delegation_info(edge.exported_program().graph_module)
        df = info.get_operator_delegation_dataframe()
        result["et_delegation"] = {"summary": info.get_summary(),
                                   "counts": [info.num_delegated_subgraphs, info.num_delegated_nodes,
                                              info.num_non_delegated_nodes],
                                   "columns": list(df.columns), "rows": df.astype(object).values.tolist()}
        return edge

    exir.to_edge_transform_and_lower = lowered


def _reference_lowering(model, inputs, *, backend: str, quantize: bool, trace: bool, out: str | None = None,
                        runs: int = 2) -> dict | None:
    """Lower the model here once more with plain ExecuTorch APIs, the way a user does without etlens.

    The patched ``to_edge_transform_and_lower`` records ExecuTorch's delegation info of the lowered
    program (the report lowers in a child process). With ``out``, the plain flow goes on as a user's
    would — ``to_executorch``, ``.pte`` + ETRecord written, ``runs`` runs in the ExecuTorch runtime
    with ETDump and a debug buffer — and returns the paths it wrote: the tests build the report from
    these files too and check it says what ``report --model`` said (tests/corpus/test_corpus.py).
    """
    import torch
    from executorch.exir import to_edge_transform_and_lower

    from etlens.passes.backends import get_backend
    from etlens.passes.quantize import quantize_pt2e

    del trace
    cfg = get_backend(backend)
    if quantize:
        model = quantize_pt2e(model, inputs, cfg)
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=cfg.partitioners(),
                                       generate_etrecord=out is not None)
    if out is None:
        return None
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from etlens.passes import oplibs
    from etlens.passes.debug_buffer import debug_buffer_bytes, trim_debug_buffer

    os.makedirs(out, exist_ok=True)
    files = {k: os.path.join(out, f"plain.{k}") for k in ("pte", "etrecord", "etdp", "debug.bin")}
    if quantize:
        oplibs.load(["executorch.kernels.quantized"])
    et = edge.to_executorch()
    with open(files["pte"], "wb") as f:
        f.write(et.buffer)
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(files["etrecord"])
    module = _load_for_executorch_from_buffer(et.buffer, enable_etdump=True,
                                              debug_buffer_size=debug_buffer_bytes(et.buffer, runs))
    for _ in range(runs):
        module.forward(list(inputs))
    module.write_etdump_result_to_file(files["etdp"], files["debug.bin"])
    trim_debug_buffer(files["etdp"], files["debug.bin"])
    return files


def build(out_dir: str, arch: str, config: str) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, root)
    from tests.corpus.models import build as build_model

    from etlens.report import report_from_model

    case_dir = os.path.join(out_dir, f"{arch}-{config}")
    os.makedirs(case_dir, exist_ok=True)
    result: dict = {"arch": arch, "config": config, "ok": False}
    _record_delegation(result)
    t0 = time.perf_counter()
    try:
        model, inputs = build_model(arch)
        rep = report_from_model(model, inputs, os.path.join(case_dir, "report.html"), name=arch, runs=2,
                                inside_delegates=False,  # covered by tests/report/inside (its own cases)
                                progress=False, **CONFIGS[config])
        result.update(ok=True, files=rep.files, total_latency_ms=rep.total_latency_ms, worst_gap=rep.worst_gap)
        # the plain ExecuTorch flow on the same model (delegation reference, and the files of
        # test_report_content_equals_plain_flow); the model is built again: the report may have
        # changed nothing in it, but a user's plain flow starts from a fresh one
        model, inputs = build_model(arch)
        plain_out = os.path.join(case_dir, "plain") if f"{arch}:{config}" in CONTENT_CASES else None
        result["plain_files"] = _reference_lowering(model, inputs, out=plain_out, **CONFIGS[config])
    except BaseException as exc:  # noqa: B036 - recorded for the test to report
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-4000:]
    result["seconds"] = round(time.perf_counter() - t0, 2)
    with open(os.path.join(case_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    return result


if __name__ == "__main__":
    res = build(*sys.argv[1:4])
    print(json.dumps({k: res.get(k) for k in ("arch", "config", "ok", "seconds", "error")}))

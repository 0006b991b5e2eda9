"""Build one corpus case the way ``etlens report --model`` does, and record what ExecuTorch says about it.

``python tests/corpus/build.py OUT_DIR ARCH CONFIG`` (CONFIG: ``fp32-xnnpack``, ``int8-xnnpack``,
``fp32-portable``) writes ``OUT_DIR/ARCH-CONFIG/``: the report (``report.html`` and its side files,
``report_artifacts/`` with the ``.pte``, ETRecord, ETDump, debug buffer and pass trace) and
``result.json``: build time, whether it worked, the error when not, and ExecuTorch's own
``get_delegation_info`` on the lowered program in memory (summary and per-operator table), recorded
inside the report's worker child right after its lowering (``child_hook/``), which
the tests compare with etlens' answer from the ETRecord. ``... ARCH CONFIG --plain`` (for the
:data:`CONTENT_CASES`) writes ``plain/`` (the same model through plain ExecuTorch APIs: ``.pte``, ETRecord,
ETDump, debug buffer) and ``plain.json``.

The tests call :func:`build` in their own process (its toolchain work runs in the worker child that process
keeps warm, so a native crash of a build is that child's, not the session's) and :func:`plain` there too (the
plain flow runs the runtime in process, as the tests that compare against pybindings do); independent cases
build in parallel under pytest-xdist. From the
command line each runs in its own process; ExecuTorch's delegation info is recorded only where the process has
``child_hook/`` on its ``PYTHONPATH`` and ``ETLENS_CORPUS_DELEGATION_DIR`` set, as the test session does.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

#: the cases whose build also runs the plain flow to the end (``.pte``, ETRecord, runs with ETDump) for
#: test_report_content_equals_plain_flow: fp32 and int8 cases of each family, sized to the CI budget (the
#: other cases lower once, in the report; child_hook/ takes the delegation reference there). Not the
#: recurrent cases: this plain flow hands the runtime the nested ``(x, (h0, c0))`` as given, which it
#: rejects (a user flattens first); tests/builder/test_nested_inputs.py covers them
CONTENT_CASES = ("bert:fp32-xnnpack", "gpt2:fp32-xnnpack", "resnet:fp32-xnnpack",
                 "bert:int8-xnnpack", "resnet:int8-xnnpack", "vit:int8-xnnpack")

CONFIGS = {
    "fp32-xnnpack": dict(backend="xnnpack", quantize=False, trace=True),
    "int8-xnnpack": dict(backend="xnnpack", quantize=True, trace=True),
    "fp32-portable": dict(backend="portable", quantize=False, trace=False),
}


def delegation_target(case_dir: str) -> str:
    """Ask the worker children of this process to record ExecuTorch's delegation info of their next lowering.

    The session's children start with ``child_hook/`` first on ``PYTHONPATH`` (tests/conftest.py sets it, with
    ``ETLENS_CORPUS_DELEGATION_DIR``); its ``sitecustomize`` wraps ``to_edge_transform_and_lower`` and writes the
    info to the path named in ``<dir>/target``, which this writes. Returns that path (removed first, so a stale
    file from an earlier build never stands in for this one); :func:`build` removes the target after its build.
    """
    out = os.path.join(case_dir, "et_delegation.json")
    if os.path.exists(out):
        os.remove(out)
    hook_dir = os.environ.get("ETLENS_CORPUS_DELEGATION_DIR")
    if hook_dir:
        os.makedirs(hook_dir, exist_ok=True)
        with open(os.path.join(hook_dir, "target"), "w", encoding="utf-8") as f:
            f.write(out)
    return out


def _clear_target() -> None:
    hook_dir = os.environ.get("ETLENS_CORPUS_DELEGATION_DIR")
    if hook_dir and os.path.exists(os.path.join(hook_dir, "target")):
        os.remove(os.path.join(hook_dir, "target"))


def _plain_flow(model, inputs, *, backend: str, quantize: bool, trace: bool, out: str,
                        runs: int = 2) -> dict:
    """The plain ExecuTorch flow on the model, the way a user runs it without etlens.

    Export (+ pt2e quantize), ``to_edge_transform_and_lower``, ``to_executorch``, ``.pte`` + ETRecord
    written to ``out``, ``runs`` runs in the ExecuTorch runtime with ETDump and a debug buffer; returns
    the paths it wrote: the tests build the report from these files too and check it says what
    ``report --model`` said (tests/corpus/test_corpus.py).
    """
    import torch
    from executorch.exir import to_edge_transform_and_lower

    from etlens.builder.backends import get_backend
    from etlens.builder.quantize import quantize_pt2e

    del trace
    cfg = get_backend(backend)
    if quantize:
        model = quantize_pt2e(model, inputs, cfg)
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=cfg.partitioners(),
                                       generate_etrecord=True)
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    from etlens.builder import oplibs
    from etlens.builder.debug_buffer import debug_buffer_bytes, trim_debug_buffer

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
    """Build one case through ``report_from_model`` in this process; write and return ``result.json``.

    The tests call it in their own process (tests/corpus/conftest.py): the export runs here and the lowering and
    the runs in the worker child this process keeps warm (:mod:`etlens.builder.warm`), so the corpus pays the
    toolchain's imports once per test process, not once per case. Every error is recorded in the result (the
    test reports it), never raised.
    """
    import warnings

    from tests.corpus.models import build as build_model

    from etlens.report import report_from_model

    case_dir = os.path.join(out_dir, f"{arch}-{config}")
    os.makedirs(case_dir, exist_ok=True)
    result: dict = {"arch": arch, "config": config, "ok": False}
    delegation_out = delegation_target(case_dir)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, inputs = build_model(arch)
            rep = report_from_model(model, inputs, os.path.join(case_dir, "report.html"), name=arch, runs=2,
                                    inside_delegates=False,  # covered by tests/builder/inside (its own cases)
                                    progress=False, **CONFIGS[config])
        result.update(ok=True, files=rep.files, total_latency_ms=rep.total_latency_ms, worst_gap=rep.worst_gap)
        if os.path.exists(delegation_out):  # else the test says the reference is missing
            with open(delegation_out) as f:
                result["et_delegation"] = json.load(f)
    except Exception as exc:  # noqa: BLE001 - recorded for the test to report
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-4000:]
    finally:
        _clear_target()
    result["seconds"] = round(time.perf_counter() - t0, 2)
    with open(os.path.join(case_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    return result


def plain(out_dir: str, arch: str, config: str) -> dict:
    """The plain ExecuTorch flow on a fresh build of the model (``--plain``): ``ARCH-CONFIG/plain.json`` holds
    the files it wrote (``files``) or the error, never raised. A step of its own, so the first tier's report
    build of a content case does not pay for the heavy tier's comparison; the tests run it in their process
    (as a user's script would: export, lower, the runtime through pybindings), where the toolchain is
    imported already."""
    import warnings

    from tests.corpus.models import build as build_model

    case_dir = os.path.join(out_dir, f"{arch}-{config}")
    os.makedirs(case_dir, exist_ok=True)
    doc: dict = {"ok": False}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, inputs = build_model(arch)
            doc.update(ok=True, files=_plain_flow(model, inputs, out=os.path.join(case_dir, "plain"),
                                                  **CONFIGS[config]))
    except Exception as exc:  # noqa: BLE001 - recorded for the test to report
        doc["error"] = f"{type(exc).__name__}: {exc}"
        doc["traceback"] = traceback.format_exc()[-4000:]
    with open(os.path.join(case_dir, "plain.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
    return doc


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if sys.argv[4:5] == ["--plain"]:
        doc = plain(*sys.argv[1:4])
        print(json.dumps({k: doc.get(k) for k in ("ok", "error")}))
        sys.exit(0)
    res = build(*sys.argv[1:4])
    print(json.dumps({k: res.get(k) for k in ("arch", "config", "ok", "seconds", "error")}))

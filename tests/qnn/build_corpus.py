"""Build the QNN corpus: real Qualcomm HTP programs (SM8650, HTP v75) run on the HTP simulator.

``python tests/qnn/build_corpus.py OUT`` (``tests/conftest.py: build_once`` runs it once per content):

1. makes ``OUT/sdk`` a ``QNN_SDK_ROOT`` from the onnxruntime-qnn 2.7.0 wheel (``tests/qnn/sdk.py``;
   pip downloads it here, at test time) and restarts itself with the SDK on ``LD_LIBRARY_PATH``;
2. lowers every case with ExecuTorch 1.5.1's own QNN flow in this one process
   (``to_edge_transform_and_lower_to_qnn(..., generate_etrecord=True)``, ``QnnQuantizer`` for int8);
3. runs every program in one child process through ExecuTorch's runtime
   (``_load_for_executorch_from_buffer(..., enable_etdump=True, debug_buffer_size=...)``), writing
   ``<case>.pte``, ``<case>.etrecord``, ``<case>.etdp`` and, for dumps, ``<case>.bin``.

``OUT/manifest.json`` lists the cases with what the build itself knows (CPU nodes and the reason the
QNN partitioner logged, the lowered graph's quantization encodings, the planted fault), so tests
check etlens against the build. Cases (all SM8650):

* ``cnn_fp16`` / ``cnn_int8``: a small CNN, fp16 and int8 (QnnQuantizer), profile_level=2, 3 runs;
* ``block_fp16``: a transformer block (attention + GELU MLP), profile_level=2, 3 runs;
* ``fallback_fp16``: a CNN with two ops QNN does not take (CPU fallbacks), profile_level=2;
* ``dump_fp16`` / ``dump_int8``: the CNN with ``dump_intermediate_outputs=True`` and a debug buffer;
* ``fault_int8``: ``dump_int8`` with conv2's int8 weights negated inside the QNN program only (its
  ETRecord is the clean build's: same graph, same encodings), so the first divergence is conv2.

For the dumps the manifest also holds ExecuTorch's own ``QNNIntermediateDebugger`` per-op MSE
(``reference_mse``), computed here because it needs the live edge program (tests compare etlens with it).

Simulator cycles are not deterministic: tests check structure, names, mapping and sums, never values.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOC = "SM8650"
RUNS = 3

CASES = {
    # name: (model, input, quantize, dump, profile_level, runs, plant)
    "cnn_fp16": ("SmallCnn", "cnn_input", False, False, 2, RUNS, False),
    "cnn_int8": ("SmallCnn", "cnn_input", True, False, 2, RUNS, False),
    "block_fp16": ("Block", "block_input", False, False, 2, RUNS, False),
    "fallback_fp16": ("Fallback", "cnn_input", False, False, 2, RUNS, False),
    "dump_fp16": ("SmallCnn", "cnn_input", False, True, 0, 1, False),
    "dump_int8": ("SmallCnn", "cnn_input", True, True, 0, 1, False),
    "fault_int8": ("SmallCnn", "cnn_input", True, True, 0, 1, True),
}
#: the node the planted fault changes (conv2's output)
FAULT_NODE = "aten_convolution_default_1"


def _sdk(out: Path) -> Path:
    sys.path.insert(0, str(HERE.parent.parent))
    from tests.qnn.sdk import ensure_sdk

    return ensure_sdk(out / "sdk")


class _Reasons(logging.Handler):
    """The QNN partitioner's support-check log lines (``[phase] op | reason``)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _quantize(model, inputs, soc):
    import torch
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from etlens.builder import histogram_search

    histogram_search.install()  # the same ranges as torchao's own search, without a tensor operation per step
    gm = torch.export.export(model, inputs, strict=True).module()
    gm = prepare_pt2e(gm, QnnQuantizer(soc_model=getattr(QcomChipset, soc)))
    gm(*inputs)
    return convert_pt2e(gm)


def _plant(gm):
    """Negate conv2's int8 weights in a copy of the converted module (encodings unchanged)."""
    import torch

    gm = copy.deepcopy(gm)
    for node in gm.graph.nodes:
        if node.target is torch.ops.aten.conv2d.default and "conv2" in str(node.meta.get("nn_module_stack")):
            dq = node.args[1]
            attr = dq.args[0]
            w = getattr(gm, attr.target)
            setattr(gm, attr.target, torch.clamp(-w.to(torch.int16), -127, 127).to(w.dtype))
            return gm
    raise RuntimeError("conv2 weight not found")


def _lowered_facts(edge) -> dict:
    """CPU nodes of the final program and the quantization encodings of each delegate's graph."""
    import torch

    ep = edge.exported_program()
    cpu, enc = [], {}
    for n in ep.graph_module.graph.nodes:
        if n.op == "call_function" and "call_delegate" not in str(n.target) and n.target is not __import__(
                "operator").getitem:
            cpu.append({"name": n.name, "target": str(getattr(n.target, "__name__", n.target))})
        if n.op == "get_attr" and n.name.startswith("lowered_module"):
            low = getattr(ep.graph_module, n.target)
            for k in low.original_module.graph_module.graph.nodes:
                qa = k.meta.get("quant_attrs")
                if qa and k.op == "call_function":
                    enc[k.name] = {"scale": float(qa["scale"]) if not torch.is_tensor(qa["scale"]) else None,
                                   "zero_point": int(qa["zero_point"]) if not torch.is_tensor(
                                       qa["zero_point"]) else None,
                                   "dtype": str(qa["dtype"])}
    return {"cpu_nodes": cpu, "encodings": enc}


def _reference(out: Path, manifest: dict, live: dict) -> None:
    """ExecuTorch's own QNNIntermediateDebugger on each dump (the reference for per-op numerics inside QNN):
    per-op MSE into the manifest. It needs the live edge program (its layout meta), so it runs here."""
    import torch
    from executorch.backends.qualcomm.debugger.qcom_numerical_comparator_sample import QcomMSEComparator
    from executorch.backends.qualcomm.debugger.qnn_intermediate_debugger import QNNIntermediateDebugger

    for case, record in live.items():
        inputs = torch.load(out / f"{case}.inputs.pt")
        dbg = QNNIntermediateDebugger(inputs)
        dbg.set_etrecord_file_path(str(out / f"{case}.etrecord"))
        dbg.set_edge_ep(record.graph_map[dbg.reference_graph_name])
        dbg.setup_inspector(str(out / f"{case}.etdp"), str(out / f"{case}.bin"))
        df = dbg.inspector.calculate_numeric_gap(distance=dbg.create_comparator(QcomMSEComparator),
                                                 reference_graph=dbg.reference_graph_name)
        manifest["cases"][case]["reference_mse"] = {
            ",".join(map(str, r["runtime_ops"])): float(r["gap"][0]) for _, r in df.iterrows()}


def _compile(out: Path) -> dict:
    import torch
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
        get_qnn_context_binary_alignment,
        to_edge_transform_and_lower_to_qnn,
    )
    from executorch.exir import ExecutorchBackendConfig

    from tests.qnn import models

    reasons = _Reasons()
    plog = logging.getLogger("executorch.backends.qualcomm.partition.qnn_partitioner")
    plog.addHandler(reasons)
    plog.setLevel(logging.INFO)
    logging.getLogger().setLevel(logging.WARNING)
    manifest: dict = {"soc": SOC, "htp_arch": "V75", "cases": {}, "fault_node": FAULT_NODE}
    quantized: dict = {}
    live: dict = {}

    def lower(gm, inputs, spec):
        edge = to_edge_transform_and_lower_to_qnn(gm, inputs, spec, generate_etrecord=True)
        facts = _lowered_facts(edge)
        prog = edge.to_executorch(ExecutorchBackendConfig(segment_alignment=get_qnn_context_binary_alignment()))
        return prog, facts

    only = os.environ.get("QNN_CORPUS_ONLY")  # a comma list of cases, while developing
    for case, (model_name, input_name, quant, dump, profile, runs, plant) in CASES.items():
        if only and case not in only.split(","):
            continue
        t0 = time.time()
        torch.manual_seed(0)
        model = getattr(models, model_name)().eval()
        inputs = getattr(models, input_name)()
        backend = generate_htp_compiler_spec(use_fp16=not quant)
        spec = generate_qnn_executorch_compiler_spec(soc_model=getattr(QcomChipset, SOC), backend_options=backend,
                                                     profile_level=profile, dump_intermediate_outputs=dump)
        if quant:
            key = (model_name, input_name)
            if key not in quantized:
                quantized[key] = _quantize(model, inputs, SOC)
            gm = quantized[key]
        else:
            gm = model
        reasons.lines.clear()
        prog, facts = lower(gm, inputs, spec)
        log = list(reasons.lines)
        record = prog.get_etrecord()
        if dump:
            live[case] = record
        if plant:
            prog, _ = lower(_plant(gm), inputs, spec)
        record.update_representative_inputs(inputs)
        record.save(str(out / f"{case}.etrecord"))
        (out / f"{case}.pte").write_bytes(prog.buffer)
        torch.save(inputs, out / f"{case}.inputs.pt")
        plan = prog.executorch_program.execution_plan[0]
        manifest["cases"][case] = {
            "model": model_name, "precision": "int8" if quant else "fp16", "dump": dump,
            "profile_level": profile, "runs": runs, "planted": plant,
            "delegates": [d.id for d in plan.delegates], **facts,
            "partitioner_log": [x for x in log if "|" in x],
            "compile_s": round(time.time() - t0, 2),
        }
    return manifest, live


def _run(out: Path) -> None:
    """The child: run every program through ExecuTorch's runtime, writing its ETDump (+ debug buffer)."""
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    manifest = json.loads((out / "manifest.json").read_text())
    for case, facts in manifest["cases"].items():
        inputs = torch.load(out / f"{case}.inputs.pt")
        buf = (out / f"{case}.pte").read_bytes()
        size = 8 << 20 if facts["dump"] else 0
        module = _load_for_executorch_from_buffer(buf, enable_etdump=True, debug_buffer_size=size)
        for _ in range(facts["runs"]):
            module.forward(inputs)
        if size:
            module.write_etdump_result_to_file(str(out / f"{case}.etdp"), str(out / f"{case}.bin"))
        else:
            module.write_etdump_result_to_file(str(out / f"{case}.etdp"))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--run"]:
        sys.path.insert(0, str(HERE.parent.parent))
        _run(Path(argv[1]))
        return 0
    out = Path(argv[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    root = _sdk(out)
    from tests.qnn.sdk import env

    if os.environ.get("QNN_SDK_ROOT") != str(root):
        # the dynamic loader reads LD_LIBRARY_PATH at start: restart with the SDK on it
        return subprocess.run([sys.executable, __file__, str(out)], env=env(root)).returncode
    t0 = time.time()
    manifest, live = _compile(out)
    manifest["compile_s"] = round(time.time() - t0, 2)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    t1 = time.time()
    subprocess.run([sys.executable, __file__, "--run", str(out)], check=True)
    manifest["run_s"] = round(time.time() - t1, 2)
    t2 = time.time()
    _reference(out, manifest, live)
    manifest["reference_s"] = round(time.time() - t2, 2)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

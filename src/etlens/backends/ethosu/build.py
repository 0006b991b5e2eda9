"""Compile for Arm Ethos-U NPUs with ExecuTorch's Arm backend and keep what Vela said.

ExecuTorch 1.5.1's Arm backend lowers the delegated subgraph to TOSA and hands it to Vela
(``pip install ethos-u-vela``), which compiles it for the NPU on an ordinary CPU. Vela's numbers —
the network summary (SRAM, flash, NPU/CPU operators, MACs, cycles) and the per-layer table of
``--verbose-performance`` — exist only at compile time, so :class:`VelaCapture` records them while
the program is lowered, together with two facts the Arm backend computes and then forgets:

* which fx node each TOSA operator came from (its output tensor name is what Vela's per-layer table
  calls the layer; the node carries the ``debug_handle`` the ETRecord uses), by watching the
  backend's node visitors serialize operators;
* why the partitioner left a node on the CPU (the reasons its operator-support checks give to
  ExecuTorch's ``WhyNoPartitionReporter``).

:func:`write_sidecar` stores all of it as ``<stem>.vela.json`` next to the ``.pte`` and
``.etrecord`` (format described in :mod:`etlens.backends.ethosu.vela`); the analyses read it from
there (``etlens delegation``, the report).

Example (in a process where ExecuTorch may run)::

    from etlens.backends.ethosu.build import VelaCapture, ethosu_partitioner, write_sidecar
    with VelaCapture("ethos-u55-128") as cap:
        edge = to_edge_transform_and_lower(ep, partitioner=[ethosu_partitioner("ethos-u55-128")], ...)
    write_sidecar(cap, "out/model.pte")
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import os
import sys
import tempfile
from typing import Any

__all__ = ["ETHOSU_TARGETS", "ethosu_compile_spec", "ethosu_quantizer", "ethosu_partitioner",
           "ethosu_edge_compile_config", "VelaCapture", "vela_sidecar", "write_sidecar", "sidecar_path",
           "observe_arm_passes", "recipe_apply"]

#: The configurations registered as backends (``--backend NAME``), each with the Arm backend's default
#: Vela system configuration and memory mode: U55 ``Shared_Sram``, U65 ``Dedicated_Sram_384KB`` (scratch
#: in DRAM, Vela's arena cache — the fast scratch — in SRAM), U85 ``Sram_Only``. Vela accepts more.
ETHOSU_TARGETS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")
_VELA_FLAGS = ["--verbose-performance"]


def ethosu_compile_spec(target: str) -> Any:
    """``EthosUCompileSpec(target)`` with Vela's per-layer table switched on."""
    from executorch.backends.arm.ethosu import EthosUCompileSpec

    return EthosUCompileSpec(target, extra_flags=list(_VELA_FLAGS))


def ethosu_quantizer(target: str) -> Any:
    """The Arm quantizer for ``target`` with the symmetric int8 configuration."""
    from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config

    return EthosUQuantizer(ethosu_compile_spec(target)).set_global(get_symmetric_quantization_config())


def ethosu_partitioner(target: str) -> Any:
    from executorch.backends.arm.ethosu import EthosUPartitioner

    return EthosUPartitioner(ethosu_compile_spec(target))


def ethosu_edge_compile_config() -> Any:
    """The edge config the Arm backend needs (its passes produce ops outside the core ATen set)."""
    from executorch.exir import EdgeCompileConfig

    return EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True)


def sidecar_path(artifact: str) -> str:
    """``out/model.pte`` -> ``out/model.vela.json``."""
    stem, _ = os.path.splitext(os.fspath(artifact))
    return stem + ".vela.json"


@contextlib.contextmanager
def _captured_stdout():
    """Collect what Vela prints (Python ``print`` and the native compiler's writes to fd 1)."""
    buf = io.StringIO()
    sys.stdout.flush()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        try:
            saved = os.dup(1)
        except OSError:
            saved = None
        if saved is not None:
            os.dup2(tmp.fileno(), 1)
        try:
            with contextlib.redirect_stdout(buf):
                yield buf
        finally:
            sys.stdout.flush()
            if saved is not None:
                os.dup2(saved, 1)
                os.close(saved)
            tmp.seek(0)
            native = tmp.read().decode("utf-8", "replace")
            if native:
                buf.write(native)


def _read_text(pattern: str) -> str:
    hits = sorted(glob.glob(pattern))
    if not hits:
        return ""
    with open(hits[0], encoding="utf-8", errors="replace") as f:
        return f.read()


def _vela_memory(npz: str) -> dict[str, int]:
    """The scratch sizes Vela wrote into its raw output (``--output-format=raw``: ``out_vela.npz``).

    ``scratch_bytes`` is what the payload's ``scratch_size`` block carries; ``scratch_fast_bytes``
    (Vela's arena cache, the *fast scratch*: non-zero only in the ``Dedicated_Sram`` memory mode) and
    the region numbers the Arm backend drops when it packs the payload, so they are kept here.
    """
    try:
        import numpy as np

        with np.load(npz, allow_pickle=False) as data:
            out = {}
            for key, name in (("scratch_size", "scratch_bytes"), ("scratch_fast_size", "scratch_fast_bytes"),
                              ("scratch_region", "scratch_region"), ("scratch_fast_region", "scratch_fast_region")):
                if key in data.files:
                    out[name] = int(np.asarray(data[key]).reshape(-1)[0])
            return out
    except Exception:  # noqa: BLE001 - an older Vela without these fields: the sidecar just lacks them
        return {}


def _module_path(meta: dict[str, Any]) -> str:
    stack = meta.get("nn_module_stack") or {}
    if not isinstance(stack, dict) or not stack:
        return ""
    last = list(stack.values())[-1]
    return str(last[0]) if isinstance(last, (tuple, list)) and last else ""


def _origin(meta: dict[str, Any]) -> list[str]:
    """Unique names along the node's ``from_node`` chain, nearest first (the last is the export-time node)."""
    out: list[str] = []
    nodes = list(meta.get("from_node") or [])
    while nodes and len(out) < 32:
        n = nodes.pop(0)
        name = getattr(n, "name", None)
        if name and name not in out:
            out.append(name)
        nodes.extend(getattr(n, "from_node", None) or [])
    return out


class VelaCapture:
    """While active, every Ethos-U compile records Vela's output, TOSA op origins and CPU reasons.

    Attributes after the block: ``partitions`` (one dict per delegate, in lowering order) and
    ``cpu_reasons`` (edge node name -> the partitioner's reason).
    """

    def __init__(self, target: str, keep_tosa: bool = True) -> None:
        self.target = target
        self.keep_tosa = keep_tosa
        self.partitions: list[dict[str, Any]] = []
        self.cpu_reasons: dict[str, str] = {}
        self._ops: list[dict[str, Any]] = []
        self._restore: list[tuple[Any, str, Any]] = []

    # -- patches ------------------------------------------------------------------------------
    def _patch(self, owner: Any, attr: str, value: Any) -> None:
        self._restore.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, value)

    def __enter__(self) -> "VelaCapture":
        import executorch.backends.arm.ethosu.backend as eu_backend
        from executorch.backends.arm.operators.node_visitor import NodeVisitor
        from executorch.exir.backend.utils import WhyNoPartitionReporter

        cap = self
        original_compile = eu_backend.vela_compile
        original_serialize = NodeVisitor._serialize_operator
        original_reject = WhyNoPartitionReporter.report_reject

        def serialize(visitor: Any, node: Any, tosa_graph: Any, tosa_op: Any, inputs: Any, outputs: Any,
                      *args: Any, **kwargs: Any) -> Any:
            try:
                handle = node.meta.get("debug_handle")
                cap._ops.append({
                    "tensor": str(outputs[0]) if outputs else node.name,
                    "op": str(tosa_op).split(".")[-1],
                    "node": node.name,
                    "debug_handle": list(handle) if isinstance(handle, (tuple, list)) else handle,
                    "module": _module_path(node.meta),
                    "origin": _origin(node.meta),
                })
            except Exception:  # bookkeeping must never break the lowering
                pass
            return original_serialize(visitor, node, tosa_graph, tosa_op, inputs, outputs, *args, **kwargs)

        def report_reject(reporter: Any, node: Any, reason: str) -> Any:
            name = getattr(node, "name", None)
            if name and name not in cap.cpu_reasons:
                cap.cpu_reasons[name] = str(reason)
            return original_reject(reporter, node, reason)

        def vela_compile(tosa_flatbuffer: bytes, args: list[str], verbose: bool = False,
                         intermediate_path: str | None = None, **kwargs: Any) -> Any:
            ops, cap._ops = cap._ops, []
            with tempfile.TemporaryDirectory(prefix="etlens-vela-") as tmp:
                with _captured_stdout() as out:
                    result = original_compile(tosa_flatbuffer, list(args), verbose, tmp, **kwargs)
                cap.partitions.append({
                    "index": len(cap.partitions),
                    "stdout": out.getvalue(),
                    "per_layer_csv": _read_text(os.path.join(tmp, "output", "*_per-layer.csv")),
                    "summary_csv": _read_text(os.path.join(tmp, "output", "*_summary_*.csv")),
                    "compile_flags": [a for a in args if a.startswith("--")],
                    "memory": _vela_memory(os.path.join(tmp, "output", "out_vela.npz")),
                    "tosa_ops": ops,
                    "tosa": bytes(tosa_flatbuffer) if cap.keep_tosa else None,
                })
            return result

        self._patch(eu_backend, "vela_compile", vela_compile)
        self._patch(NodeVisitor, "_serialize_operator", serialize)
        self._patch(WhyNoPartitionReporter, "report_reject", report_reject)
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._restore:
            owner, attr, value = self._restore.pop()
            setattr(owner, attr, value)

    def document(self) -> dict[str, Any]:
        """The sidecar document (without TOSA bytes; :func:`write_sidecar` stores those as files)."""
        try:
            from importlib.metadata import version

            vela_version = version("ethos-u-vela")
        except Exception:
            vela_version = ""
        return {
            "format": "etlens-vela",
            "version": 1,
            "target": self.target,
            "vela_version": vela_version,
            "partitions": [{k: v for k, v in p.items() if k != "tosa"} for p in self.partitions],
            "cpu_reasons": dict(self.cpu_reasons),
        }


@contextlib.contextmanager
def observe_arm_passes(recorder: Any):
    """While active, report every pass the Arm backend runs inside its ``preprocess``.

    The Arm backend lowers each delegated partition to TOSA with its own pass manager
    (``ArmPassManager.transform_to_backend_pipeline``: some 150 passes — decompositions, q/dq
    folding, layout annotation, ``ExirToTosaPass``, rescale insertion) inside
    ``to_edge_transform_and_lower``, where no outside pass list can reach them. The manager runs
    each of its graph passes through one adapter (``_ExportedProgramGraphPassAdapter.call``) on the
    partition's ``ExportedProgram``; wrapping that method (and the pipeline entry, to see where a
    partition starts) observes the real passes on the real program without changing what they do.

    ``recorder`` gets ``partition(program)`` before a partition's pipeline,
    ``passed(name, program, seconds, modified)`` after each pass (``seconds``: the pass alone) and
    ``failed(name, program, exc)`` when one raises (the exception then propagates as before). A
    recorder that raises is ignored: observation never breaks the lowering.
    (:mod:`etlens.passes.preprocess` turns these into trace snapshots.)
    """
    import time

    from executorch.backends.arm._passes import arm_pass_manager as apm

    adapter, manager = apm._ExportedProgramGraphPassAdapter, apm.ArmPassManager
    original_call, original_pipeline = adapter.call, manager.transform_to_backend_pipeline

    def quiet(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - bookkeeping must never break the lowering
            pass

    def pipeline(self: Any, exported_program: Any, graph_module: Any) -> Any:
        if graph_module is exported_program.graph_module:  # a partition (not a control-flow branch)
            quiet(recorder.partition, exported_program)
        return original_pipeline(self, exported_program, graph_module)

    def call(self: Any, exported_program: Any) -> Any:
        name = apm._graph_pass_name(self.graph_pass)
        t0 = time.perf_counter()
        try:
            result = original_call(self, exported_program)
        except Exception as exc:
            quiet(recorder.failed, name, exported_program, exc)
            raise
        seconds = time.perf_counter() - t0
        quiet(recorder.passed, name, result.exported_program, seconds, bool(result.modified))
        return result

    adapter.call, manager.transform_to_backend_pipeline = call, pipeline
    try:
        yield recorder
    finally:
        adapter.call, manager.transform_to_backend_pipeline = original_call, original_pipeline


@contextlib.contextmanager
def vela_sidecar(target: str, pte: str):
    """Record Vela's output while the body lowers for ``target``; then write ``<stem>.vela.json`` beside ``pte``
    (the :class:`~etlens.builder.backends.BackendConfig` ``lowering_context`` of the Ethos-U backends)."""
    with VelaCapture(target) as cap:
        yield cap
    if cap.partitions:
        write_sidecar(cap, pte)


def write_sidecar(capture: VelaCapture, artifact: str) -> str:
    """Write ``<stem>.vela.json`` (and ``<stem>.ethosu<k>.tosa`` per partition) next to ``artifact``."""
    path = sidecar_path(artifact)
    doc = capture.document()
    stem = os.path.splitext(path)[0][: -len(".vela")]
    for part, src in zip(doc["partitions"], capture.partitions, strict=True):
        if src.get("tosa"):
            tosa = f"{stem}.ethosu{part['index']}.tosa"
            with open(tosa, "wb") as f:
                f.write(src["tosa"])
            part["tosa_file"] = os.path.basename(tosa)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return path


def config(name: str) -> Any:
    """The ``build`` hook: how to compile for the Ethos-U configuration ``name`` (one of :data:`ETHOSU_TARGETS`).

    Compiled and estimated, not run (``runs=False``: no FVP here); the Arm TOSA passes inside the
    backend's preprocess are traced too (``preprocess_observer``).
    """
    from etlens.builder.backends import BackendConfig

    return BackendConfig(
        name=name,
        description=f"Arm Ethos-U NPU ({name}): Arm quantizer, EthosUPartitioner, Vela (compiled, estimated, "
                    "not run: no FVP here)",
        requires=["executorch.exir", "executorch.backends.arm.ethosu", "ethosu.vela"],
        install_hint="pip install 'etlens[ethos-u]' && pip install --no-deps tosa-tools==2026.5.0",
        quantizer_factory=lambda: ethosu_quantizer(name),
        edge_compile_config=ethosu_edge_compile_config,
        partitioner_factory=lambda: ethosu_partitioner(name),
        lowering_context=lambda pte: vela_sidecar(name, pte),
        preprocess_observer=observe_arm_passes,
        runs=False,
        int8_only=True,
        module_advice={"tosa_serializer": TOSA_ADVICE},
    )


#: what to do when tosa_serializer (tosa-tools, imported by the Arm TOSA passes) is missing
TOSA_ADVICE = ("pip install 'etlens[ethos-u]' && pip install --no-deps tosa-tools==2026.5.0 (tosa-tools provides "
               "tosa_serializer, which the Arm TOSA passes import; --no-deps because its exact pins would "
               "downgrade numpy and flatbuffers)")


_RECIPE_CALLS = '''import json

keep = json.load(open("recipe.json"))["keep_float"]

from executorch.backends.arm.ethosu import EthosUCompileSpec
from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

quantizer = EthosUQuantizer(EthosUCompileSpec("{target}")).set_global(get_symmetric_quantization_config())
for path in keep:
    quantizer.set_module_name(path, None)            # None: leave the module unquantized
gm = torch.export.export(model, inputs).module(check_guards=False)
prepared = prepare_pt2e(gm, quantizer)
prepared(*inputs)                                    # calibrate
quantized = convert_pt2e(prepared)                   # then export and lower as usual (EthosUPartitioner)
'''


def recipe_apply(build_name: str) -> dict[str, str]:
    """How the Arm quantizer keeps a recipe's modules in float (the recipe file's ``apply`` block)."""
    return {
        "quantizer": "EthosUQuantizer (TOSAQuantizer)",
        "method": "module_name_none",
        "calls": _RECIPE_CALLS.replace("{target}", build_name),
        "consumer_weights": "the module is left unquantized as a whole; Ethos-U runs float ops on the CPU, not "
                            "the NPU",
    }

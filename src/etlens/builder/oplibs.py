"""Which operator libraries a program needs, and loading them: the one place that decides.

Some operators are not part of torch: ExecuTorch's LLM ops (``llama::update_cache``,
``llama::custom_sdpa``, written by ``export_llama -kv --use_sdpa_with_kv_cache``), the out-variant
quantized kernels (``quantized_decomposed::quantize_per_tensor.out`` …, needed by ``to_executorch``
and the runtime for portable int8 programs) and torchao's affine quantization ops (``-qmode 8da4w``).
Every process that deserializes, exports, lowers, runs or re-runs such a program must have
registered them first: the user's process (export, the numerics reference run), the lowering /
runtime child (:mod:`etlens.builder.runner`) and the inside-the-delegate worker. Without them torch
says ``Cannot auto-functionalize op torch.ops.llama.update_cache.default`` or the runtime says
``Missing operator``, far from the cause.

The decision is made from operator names, in any spelling etlens meets them: a ``.pte``'s operator
table (``llama::custom_sdpa``), an FX target (``torch.ops.llama.custom_sdpa.default``, an
``OpOverload``), an edge-dialect target (``executorch.exir.dialects.edge.ops.llama.custom_sdpa.default``)
or a serialized target in a program's JSON. Only the namespace matters:

==========================  ==================================================  ============================
namespace                   library imported                                    registers
==========================  ==================================================  ============================
``llama``                   ``executorch.extension.llm.custom_ops.custom_ops``  ``update_cache``, ``custom_sdpa``
                                                                                (eager CPU kernels, out variants)
``quantized_decomposed``    ``executorch.kernels.quantized``                    out variants + runtime kernels
``torchao``                 ``torchao``                                          ``quantize_affine``,
                                                                                ``dequantize_affine``, …
==========================  ==================================================  ============================

Example::

    from etlens.builder import oplibs
    oplibs.libraries_for(["llama::update_cache", "aten::add"])   # ['executorch.extension.llm.custom_ops.custom_ops']
    oplibs.load_for(ep)            # an ExportedProgram / GraphModule / .pte path / names; returns what it loaded

Loading is idempotent and cheap after the first time (Python caches the import). A library that
cannot be imported raises :class:`~etlens.errors.BackendUnavailableError` naming the operator that
needs it and what to install.
"""

from __future__ import annotations

import importlib
import os
import re
import zipfile
from collections.abc import Iterable
from typing import Any

from ..errors import BackendUnavailableError

__all__ = ["EAGER_LIBRARIES", "ENV", "LIBRARIES", "libraries_for", "namespaces_of", "load", "load_for", "op_names"]

#: operator namespace -> the Python module whose import registers its operators
LIBRARIES: dict[str, str] = {
    "llama": "executorch.extension.llm.custom_ops.custom_ops",
    "quantized_decomposed": "executorch.kernels.quantized",
    "torchao": "torchao",
}

#: namespace -> a native library (path inside the ``executorch`` package) that registers the same
#: operators' eager CPU kernels alone. Running a program eagerly (the numerics reference) needs only
#: those; importing the Python module also registers fake kernels for export and pulls in
#: ``torch._inductor`` (seconds of CPU), so :func:`load_for` with ``eager=True`` loads just the library.
EAGER_LIBRARIES: dict[str, str] = {
    "llama": "extension/llm/custom_ops/libcustom_ops_aot_lib.so",
}

#: environment variable naming extra operator-library modules to import (comma-separated)
ENV = "ETLENS_OP_LIBRARIES"
_PREFIXES = ("executorch.exir.dialects.edge.ops.", "torch.ops.")
_loaded: set[str] = set()


def _namespace(name: str) -> str | None:
    """The operator namespace of one name in any of the spellings above (None: not an operator name)."""
    name = str(name).strip()
    if "::" in name:
        return name.split("::", 1)[0].rsplit(".", 1)[-1] or None
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            rest = name[len(prefix):]
            return rest.split(".", 1)[0] if "." in rest else None
    if "." in name:  # an OpOverload's str(): "llama.update_cache.default"
        return name.split(".", 1)[0]
    return None


def namespaces_of(names: Iterable[Any]) -> set[str]:
    """The operator namespaces the given names belong to."""
    out = set()
    for n in names:
        ns = _namespace(str(n))
        if ns:
            out.add(ns)
    return out


def libraries_for(names: Iterable[Any]) -> list[str]:
    """Modules to import before handling a program that calls ``names`` (sorted, no duplicates)."""
    return sorted({LIBRARIES[ns] for ns in namespaces_of(names) if ns in LIBRARIES})


def op_names(obj: Any) -> list[str]:
    """Operator names of an ExportedProgram, GraphModule, ``.pte`` path/bytes, or an iterable of names.

    A ``.pte`` is read with etlens' own reader (its operator table, every method); FX graphs give
    their ``call_function`` targets (a delegate's lowered module is searched too, since its
    original program may hold custom ops the partitioner left outside the payload).
    """
    if isinstance(obj, (str, os.PathLike)) and os.path.isfile(obj):
        path = str(obj)
        if zipfile.is_zipfile(path):  # a torch.export .pt2 (or an ETRecord): its serialized graphs' targets
            return _archive_op_names(path)
        from ..readers.pte import read

        return [op.name for plan in read(path).program.execution_plan for op in plan.operators]
    if isinstance(obj, (bytes, bytearray)):
        from ..readers.pte import read_pte_bytes

        return [op.name for plan in read_pte_bytes(bytes(obj)).program.execution_plan for op in plan.operators]
    gm = getattr(obj, "graph_module", obj)
    graph = getattr(gm, "graph", None)
    if graph is not None:
        out = []
        for n in graph.nodes:
            if n.op == "call_function":
                out.append(str(n.target))
                # a higher-order op (auto_functionalized_v2) carries the custom op as its first argument
                out.extend(str(a) for a in n.args[:1] if callable(a) and hasattr(a, "_schema"))
        return out
    nodes = getattr(obj, "nodes", None)
    if nodes is not None:  # a JsonProgram (etlens.analysis.numerics.jsonrun): serialized targets and op args
        out = []
        for n in nodes:
            out.append(str(getattr(n, "target", "")))
            for a in getattr(n, "inputs", None) or ():
                arg = a.get("arg") if isinstance(a, dict) else None
                # tensors, numbers, dtypes … cannot hold an operator's name: look into the other kinds
                if not isinstance(arg, dict) or len(arg) != 1 or next(iter(arg)) not in _NO_NAME_KINDS:
                    out.extend(_strings(a))
        return out
    if isinstance(obj, str):
        return [obj]
    return [str(n) for n in obj]


_SERIALIZED_OP = re.compile(rb'"(?:torch\.ops|executorch\.exir\.dialects\.edge\.ops)\.(\w+)\.(\w+)')


def _archive_op_names(path: str) -> list[str]:
    """``ns::op`` for every operator named in the JSON entries of a zip archive (no torch needed).

    Read before the program is deserialized, since deserializing needs the operators registered.
    """
    names = set()
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            with z.open(info) as f:
                if f.read(1) != b"{":  # tensors, pickles: not a serialized graph
                    continue
                names.update(f"{ns.decode()}::{op.decode()}" for ns, op in _SERIALIZED_OP.findall(f.read()))
    return sorted(names)


#: serialized argument kinds that cannot hold an operator's name (``op_names`` skips them)
_NO_NAME_KINDS = frozenset({
    "as_none", "as_tensor", "as_tensors", "as_optional_tensor", "as_optional_tensors", "as_int", "as_ints",
    "as_float", "as_floats", "as_bool", "as_bools", "as_sym_int", "as_sym_ints", "as_sym_float", "as_sym_floats",
    "as_sym_bool", "as_sym_bools", "as_scalar_type", "as_memory_format", "as_layout", "as_device",
    "as_int_lists", "as_complex"})


def _strings(value: Any) -> list[str]:
    """Operator names among the string leaves of a serialized argument list (``as_operator`` …)."""
    if isinstance(value, str):
        return [value] if value.startswith(_PREFIXES) else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def load(modules: Iterable[str], *, why: dict[str, str] | None = None) -> list[str]:
    """Import ``modules`` (library module names); return those imported now for the first time."""
    done = []
    for mod in modules:
        if mod in _loaded:
            continue
        try:
            importlib.import_module(mod)
        except Exception as exc:  # ImportError, or a native library that does not load
            needed = f" (needed by {why[mod]})" if why and mod in why else ""
            raise BackendUnavailableError(
                f"cannot load the operator library {mod}{needed}: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}; install executorch==1.5.1 "
                f"(pip install 'etlens[executorch]') and torchao for 8da4w programs") from exc
        _loaded.add(mod)
        done.append(mod)
    return done


def _load_eager(namespace: str) -> bool:
    """Load the native kernel library of ``namespace`` (see :data:`EAGER_LIBRARIES`); False when absent."""
    import importlib.util

    rel = EAGER_LIBRARIES.get(namespace)
    spec = importlib.util.find_spec("executorch") if rel else None
    if rel is None or spec is None or not spec.submodule_search_locations:
        return False
    path = os.path.join(list(spec.submodule_search_locations)[0], rel)
    if not os.path.isfile(path):
        return False
    if path not in _loaded:
        import torch

        try:
            torch.ops.load_library(path)
        except Exception:  # a library that does not load here: the module import says why
            return False
        _loaded.add(path)
    return True


def load_for(obj: Any, *, eager: bool = False) -> list[str]:
    """Load every library the operators of ``obj`` need (see :func:`op_names`); return the modules loaded now.

    With ``eager=True`` (the program is only run, not exported or lowered) a namespace with a native
    kernel library in :data:`EAGER_LIBRARIES` loads just that library (milliseconds instead of the
    Python module's seconds); the others are imported as usual.

    Also imports the modules named in ``$ETLENS_OP_LIBRARIES`` (comma-separated): the way to register
    a custom operator library etlens does not know in the child processes too. For a ``.pt2``
    (before it is deserialized), an operator no library registered is an error naming it, instead
    of torch's "check the warnings above".
    """
    names = op_names(obj)
    why: dict[str, str] = {}
    first: dict[str, str] = {}  # namespace -> the first operator that needs it
    for n in names:
        ns = _namespace(n)
        if ns in LIBRARIES:
            first.setdefault(ns, n)
    for ns, n in first.items():  # once per namespace: the native library alone when running eagerly
        if not (eager and _load_eager(ns)):
            why.setdefault(LIBRARIES[ns], n)
    extra = [m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip()]
    done = load(sorted(why) + extra, why=why)
    if isinstance(obj, (str, os.PathLike)) and str(obj).endswith(".pt2"):
        _check_registered(str(obj), names)
    return done


def _check_registered(path: str, names: list[str]) -> None:
    import torch

    for name in names:
        ns, _, op = name.partition("::")
        if ns in ("aten", "prim", "higher_order") or not op:
            continue
        try:
            getattr(getattr(torch.ops, ns), op)
        except (AttributeError, RuntimeError):
            raise BackendUnavailableError(
                f"{path}: the program calls {name}, which no loaded operator library registers; import the "
                f"module that registers it in every etlens process: {ENV}=your.module (comma-separated)") from None

"""Read torch-side programs: ``.pt2`` files, in-memory ``ExportedProgram`` / ``GraphModule`` objects
and ExecuTorch program managers.

All of them become etlens Graphs through the one fx conversion in :mod:`etlens.readers._fx`, so a
``.pt2`` and the ``ExportedProgram`` it was saved from give identical Graph JSON.

Example::

    from etlens.readers.exported import read, read_object, graph_from_exported_program
    art = read("model.pt2")                      # torch.export.load under the hood
    g = art.graphs()["model"]
    g2 = graph_from_exported_program(torch.export.export(model, inputs), "model")
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    read_object(edge).graphs()                   # {'forward': Graph with delegate nodes}
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any

from ..errors import (EtlensError, FormatError, MissingDataError, UnsupportedFormatError, dependency_error, first_line,
                      missing_dependency)
from ..model import Graph
from .base import Artifact

__all__ = ["ExportedArtifact", "read", "read_object", "graph_from_exported_program", "graph_from_graph_module",
           "load_exported_program", "spec_type_names"]


class ExportedArtifact(Artifact):
    """Torch programs with their graphs; ``programs`` keeps the original objects by graph name."""

    def __init__(self, format: str, path: str | None, programs: dict[str, Any], graphs: dict[str, Graph]) -> None:
        super().__init__(format=format, path=path, _graphs=graphs)
        self.programs = programs

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out["delegates"] = {
            name: [{"backend_id": n.delegate.backend_id, "payload_size": n.delegate.payload_size, "node": n.name}
                   for n in g.delegates() if n.delegate is not None]
            for name, g in self.graphs().items() if g.delegates()}
        return out


def _stem(path: str) -> str:
    base = os.path.basename(path)
    return base.rsplit(".", 1)[0] if "." in base else base


def graph_from_exported_program(ep: Any, name: str = "program", *, format: str = "exported_program",
                                 stage: str | None = None) -> Graph:
    """The etlens Graph of an ``ExportedProgram`` (placeholders split by its graph signature)."""
    from ._fx import graph_from_fx

    meta = {"format": format, "stage": stage or name}
    dialect = getattr(ep, "dialect", None)
    if dialect:
        meta["dialect"] = str(dialect).lower()
    return graph_from_fx(ep.graph_module, name, ep.graph_signature, meta)


def graph_from_graph_module(gm: Any, name: str = "graph_module", *, format: str = "graph_module",
                            stage: str | None = None) -> Graph:
    """The etlens Graph of a ``torch.fx.GraphModule`` (lowered modules folded into delegate nodes)."""
    from ._fx import graph_from_fx

    return graph_from_fx(gm, name, None, {"format": format, "stage": stage or name})


def read(path: str | os.PathLike[str]) -> ExportedArtifact:
    """Load a ``.pt2`` written by ``torch.export.save`` and return its graph (named after the file)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise MissingDataError(f"{path}: no such file")
    if os.path.isdir(path):
        raise MissingDataError(f"{path}: is a directory, expected a .pt2 file")
    # validate the archive ourselves first: bounded sizes, no path tricks, clear messages
    from ._zipsafe import SafeZip

    with SafeZip(path, what=".pt2 archive", hint="write it with torch.export.save(exported_program, path)") as z:
        z.check_sizes()
    try:
        from ._torch_compat import ensure_quant_ops

        ensure_quant_ops()
        ep = load_exported_program(path)
    except (KeyboardInterrupt, MemoryError, EtlensError):
        raise
    except Exception as exc:
        if missing_dependency(exc):
            raise dependency_error(missing_dependency(exc) or "torch", f"{path}: reading a .pt2") from exc
        raise FormatError(f"{path}: torch.export.load could not read this .pt2 ({first_line(exc)}); write it with "
                          f"torch.export.save(exported_program, path) using torch {_torch_version()}") from exc
    name = _stem(path)
    # graph meta says "exported_program" (not "pt2") so a .pt2 and its in-memory program give
    # identical Graph JSON; the artifact's own format is "pt2"
    graph = graph_from_exported_program(ep, name)
    return ExportedArtifact("pt2", path, {name: ep}, {name: graph})


#: how long a JSON document of an archive may be for :func:`spec_type_names` to read it
_SPEC_JSON_LIMIT = 256 << 20
_TYPE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def spec_type_names(path: str | os.PathLike[str]) -> list[str]:
    """The Python types a saved program's inputs and outputs are made of, as torch's pytree names them.

    ``torch.export.save`` records the structure of a program's arguments and results (its
    ``in_spec``/``out_spec``) with the serialized name of every container type, for example
    ``transformers.modeling_outputs.BaseModelOutputWithPoolingAndCrossAttentions`` for a Hugging Face
    model that returns its ``ModelOutput``. Loading needs each such type registered with torch's pytree,
    which happens when its module is imported.
    """
    from ._zipsafe import SafeZip

    names: list[str] = []
    with SafeZip(path, what=".pt2 archive") as z:
        for entry in z.names():
            if "/models/" not in entry or not entry.endswith(".json"):
                continue
            try:
                doc = json.loads(z.read(entry, _SPEC_JSON_LIMIT))
            except ValueError:
                continue
            calls = ((doc.get("graph_module") or {}).get("module_call_graph") or []) if isinstance(doc, dict) else []
            for call in calls:
                sig = (call or {}).get("signature") or {}
                for key in ("in_spec", "out_spec"):
                    _spec_types(sig.get(key), names)
    return list(dict.fromkeys(names))


def _spec_types(raw: Any, out: list[str]) -> None:
    try:
        spec = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return
    stack = [spec[1] if isinstance(spec, list) and len(spec) == 2 else spec]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        t = node.get("type")
        if isinstance(t, str) and _TYPE_NAME_RE.fullmatch(t):
            out.append(t)
        stack.extend(node.get("children_spec") or [])


def _known_types() -> Any:
    """Serialized type names torch's pytree can rebuild in this process (grows as modules register)."""
    from torch.utils import _pytree as pytree

    return getattr(pytree, "SERIALIZED_TYPE_TO_PYTHON_TYPE", {})


def _import_spec_types(names: list[str]) -> list[tuple[str, str]]:
    """Import the module of every type torch's pytree does not know yet; ``[(type, why it failed)]``."""
    import importlib
    import importlib.util

    failed = []
    for name in names:
        module, why = name.rsplit(".", 1)[0], "not installed"
        while module:
            try:
                # only modules installed here are imported (a file cannot make us load code from elsewhere)
                if importlib.util.find_spec(module.split(".")[0]) is not None:
                    importlib.import_module(module)
                    why = ""
                    break
            except Exception as exc:  # noqa: BLE001 - any import failure is reported with the type
                why = f"{type(exc).__name__}: {first_line(exc, 160)}"
            module = module.rpartition(".")[0]
        if name not in _known_types():
            failed.append((name, why or "importing its module did not register it"))
    return failed


def load_exported_program(path: str | os.PathLike[str]) -> Any:
    """``torch.export.load(path)`` (tensors with ``weights_only=True``), in any process.

    A program whose inputs or outputs are containers of another library (a Hugging Face model's
    ``ModelOutput``) loads only where that library's types are registered with torch's pytree; a fresh
    process (etlens' lowering child, ``etlens info``) has not imported it. When the first load fails,
    the types are read from the archive (:func:`spec_type_names`), their modules imported, and the load
    retried once.

    Raises:
        FormatError: a type of the program's inputs/outputs cannot be imported here (names it).
        Exception: torch's own error when the archive fails for another reason.
    """
    import torch

    path = os.fspath(path)
    try:
        with _weights_only_torch_load(torch):
            return torch.export.load(path)
    except Exception:
        names = [n for n in spec_type_names(path) if n not in _known_types()]
        if not names:  # not a missing type: torch's own error stands
            raise
        failed = _import_spec_types(names)
        if failed:
            t, why = failed[0]
            raise FormatError(
                f"{path}: the program's inputs/outputs are made of {t}, which torch can only load once its module "
                f"is imported, and importing it failed ({why}); install {t.split('.')[0]} here, or export a model "
                "whose forward returns tensors, tuples or dicts") from None
    with _weights_only_torch_load(torch):
        return torch.export.load(path)


@contextlib.contextmanager
def _weights_only_torch_load(torch: Any):
    """Force ``weights_only=True`` on every ``torch.load`` inside ``torch.export.load``.

    torch's .pt2 loader retries a failed ``weights_only=True`` load with ``weights_only=False``
    (and loads pickled weights that way outright), which runs code from the archive: a crafted
    .pt2 could execute anything on ``etlens info model.pt2``. Plain tensors load the same.
    """
    original = torch.load

    def safe_load(*args: Any, **kwargs: Any) -> Any:
        kwargs["weights_only"] = True
        return original(*args, **kwargs)

    torch.load = safe_load
    try:
        yield
    finally:
        torch.load = original


def _torch_version() -> str:
    try:
        import torch

        return torch.__version__
    except Exception:  # pragma: no cover
        return "of the same version"


def _is_exported_program(obj: Any) -> bool:
    return hasattr(obj, "graph_module") and hasattr(obj, "graph_signature")


def read_object(obj: Any, name: str = "program") -> ExportedArtifact:
    """Wrap an in-memory torch/ExecuTorch program as an artifact with one Graph per program.

    Accepts ``torch.export.ExportedProgram`` (graph named ``name``), ``torch.fx.GraphModule``,
    ExecuTorch's ``EdgeProgramManager`` and ``ExecutorchProgramManager`` (one graph per method,
    named after the method), or a ``{name: program}`` dict of any of these.
    """
    programs: dict[str, Any] = {}
    graphs: dict[str, Graph] = {}
    kind = type(obj).__name__
    if _is_exported_program(obj):
        programs[name] = obj
        graphs[name] = graph_from_exported_program(obj, name)
        return ExportedArtifact("exported_program", None, programs, graphs)
    if kind in ("EdgeProgramManager", "ExecutorchProgramManager") and hasattr(obj, "methods"):
        fmt = "edge_program_manager" if kind == "EdgeProgramManager" else "executorch_program_manager"
        for method in sorted(obj.methods):
            ep = obj.exported_program(method)
            programs[method] = ep
            graphs[method] = graph_from_exported_program(ep, method, format=fmt, stage=method)
        return ExportedArtifact(fmt, None, programs, graphs)
    if hasattr(obj, "graph") and hasattr(obj.graph, "nodes") and hasattr(obj, "named_modules"):
        programs[name] = obj
        graphs[name] = graph_from_graph_module(obj, name)
        return ExportedArtifact("graph_module", None, programs, graphs)
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            art = read_object(value, name=str(key))
            for gname, g in art.graphs().items():
                gkey = str(key) if len(art.graphs()) == 1 else f"{key}/{gname}"
                graphs[gkey] = g
                programs[gkey] = art.programs[gname]
        return ExportedArtifact("programs", None, programs, graphs)
    raise UnsupportedFormatError(
        f"read_object: cannot read a {type(obj).__module__}.{kind}; pass a torch.export.ExportedProgram, "
        "a torch.fx.GraphModule, an EdgeProgramManager or an ExecutorchProgramManager")

"""Which delegate computes each program output: recorded while a program is lowered.

The inside-the-delegates view (:mod:`etlens.builder.inside`) lowers programs whose extra outputs
expose values inside the delegates. A backend refusing such a graph names the node by its edge
dialect name ("Output node 'aten__softmax_default' is already in the inputs"); :func:`recording`
wraps the backend's partitioner to write, before partitioning, each output's edge name, and
:func:`describe_delegates` adds, after lowering, the delegate (backend id, index) that computes it.
Both run in the worker's ``lower`` job (:mod:`etlens.builder.child`).
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["recording", "user_outputs", "describe_delegates"]


def recording(inner: Any, path: str) -> Any:
    """A partitioner that behaves as ``inner`` and first writes the program's output names to ``path``.

    The names are the edge dialect's (``aten__softmax_default``), the ones a backend's error
    message uses; written before partitioning, so they survive the backend refusing the graph.
    """
    from executorch.exir.backend.partitioner import Partitioner

    class Recording(Partitioner):
        def __init__(self) -> None:
            super().__init__(getattr(inner, "spec", {}))

        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

        def ops_to_not_decompose(self, ep: Any) -> Any:
            return inner.ops_to_not_decompose(ep)

        def transform_for_pre_decomposition(self, ep: Any) -> Any:
            return inner.transform_for_pre_decomposition(ep)

        def partition(self, exported_program: Any) -> Any:
            args = user_outputs(exported_program)
            record = [{"name": getattr(a, "name", None),
                       "target": str(getattr(getattr(a, "target", None), "__name__", "")),
                       "args": [i.name for i in getattr(a, "all_input_nodes", [])]} for a in args]
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"outputs": record}, f)
            return inner.partition(exported_program)

    return Recording()


def user_outputs(ep: Any) -> list:
    """The output node's arguments that are the program's user outputs (not buffer mutations, which come first)."""
    out = next(n for n in ep.graph_module.graph.nodes if n.op == "output")
    args = list(out.args[0]) if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
    specs = getattr(ep.graph_signature, "output_specs", None)
    if specs is None or len(specs) != len(args):
        return args
    return [a for a, spec in zip(args, specs) if getattr(spec.kind, "name", "") == "USER_OUTPUT"]


def describe_delegates(ep: Any, path: str) -> None:
    """Add to the record at ``path`` which delegate (backend id, index) computes each program output."""
    gm = ep.graph_module
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and "executorch_call_delegate" in str(n.target)]
    index = {n: i for i, n in enumerate(calls)}
    args = user_outputs(ep)
    record: dict[str, Any] = {"outputs": [{} for _ in args]}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    for slot, a in zip(record["outputs"], args):
        call = a if a in index else (a.args[0] if getattr(a, "op", None) == "call_function" and a.args and
                                     a.args[0] in index else None)
        lowered = getattr(gm, call.args[0].target, None) if call is not None else None
        slot["backend"] = str(getattr(lowered, "backend_id", "delegate")) if call is not None else None
        slot["delegate"] = index[call] if call is not None else None
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f)

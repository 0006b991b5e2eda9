"""Applying a keep-in-float recipe the toolchain's own way: the calls a user writes, and etlens makes.

A recipe's ``keep_float`` lists every module it keeps in float (culprits and the consumers whose
input stays float with them). Each toolchain's pt2e quantizer has its own way to leave modules
unquantized; each backend's folder says, per build name, the exact calls (the ``apply`` block of a
recipe file and of ``docs/fix.md``; :func:`how_to_apply`) and which of three mechanisms they use:

* ``filter`` — the quantizer quantizes only nodes a filter function accepts
  (``set_filter_function``); the filter rejects every node whose ``node.meta["nn_module_stack"]``
  passes through a kept module (:func:`quantize_node_filter`, the same few lines as the snippet);
* ``module_name_none`` — ``set_module_name(path, None)`` per kept module (``None``: no quantization);
* ``discard_nodes`` — the names of the exported graph's nodes under kept modules, given to
  ``add_discard_nodes``.

:func:`etlens.builder.recipe.recipe_quantizer` builds the backend's quantizer and applies
``keep_float`` through that mechanism, so what ``etlens fix`` simulates and lowers is what the user's
script gets. A backend without an entry falls back to :func:`etlens.builder.recipe.keep_float_quantizer`
(the annotations of the kept modules' nodes removed after the quantizer's own ``annotate``: the same
effect, by etlens).

Example::

    from etlens.builder.recipe import recipe_quantizer
    from etlens.builder.recipe_apply import how_to_apply
    q = recipe_quantizer("xnnpack", ["blocks.0.fc1", "blocks.0.fc2"])   # set_filter_function inside
    print(how_to_apply("xnnpack")["calls"])                              # what a user writes
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

__all__ = ["FILTER_PREAMBLE", "how_to_apply", "how_to_apply_all", "quantize_node_filter", "module_paths"]

#: the lines every filter-based snippet starts with: read the recipe, decide per node by its module stack
FILTER_PREAMBLE = '''import json

keep = set(json.load(open("recipe.json"))["keep_float"])


def quantize_node(node):  # False for a node of a module the recipe keeps in float
    stack = node.meta.get("nn_module_stack", {})
    return not keep & {path.removeprefix("L['self'].") for path, _ in stack.values()}
'''

_GENERIC = {
    "quantizer": "the backend's pt2e quantizer",
    "method": "unannotate",
    "calls": FILTER_PREAMBLE + '''
# Your quantizer has no module filter: after its annotate(), remove the annotations of the kept
# modules' nodes (what etlens.builder.recipe.keep_float_quantizer does):
#     for node in gm.graph.nodes:
#         if not quantize_node(node):
#             node.meta.pop("quantization_annotation", None)
''',
    "consumer_weights": "the module is left unquantized as a whole",
}



def how_to_apply(backend: str | None) -> dict[str, str]:
    """How the toolchain of build name ``backend`` leaves a recipe's modules in float.

    ``{"quantizer", "method", "calls", "consumer_weights"}``, from the backend's folder (its ``build``
    module's ``recipe_apply(build_name)``, found through the backends registry), else the generic entry
    (remove the kept modules' annotations after ``annotate``)."""
    import importlib

    from ..backends import for_build

    b = for_build(backend or "")
    spec = b.hooks.get("build") if b is not None else None
    if isinstance(spec, str):
        fn = getattr(importlib.import_module(spec.split(":", 1)[0]), "recipe_apply", None)
        entry = fn(backend) if fn is not None else None
        if entry:
            return entry
    return _GENERIC


def how_to_apply_all() -> dict[str, dict[str, str]]:
    """``{build name: entry}`` for every registered build name whose backend says how (docs, tests)."""
    from ..backends import all_backends

    out = {}
    for b in all_backends():
        for name in b.builds:
            entry = how_to_apply(name)
            if entry is not _GENERIC:
                out[name] = entry
    return out


def _normal(path: str) -> str:
    return path[len("L['self']."):] if path.startswith("L['self'].") else path


def module_paths(node: Any) -> set[str]:
    """The module paths ``node.meta["nn_module_stack"]`` passes through (every enclosing module)."""
    stack = getattr(node, "meta", {}).get("nn_module_stack") or {}
    out = set()
    for value in stack.values():
        path = value[0] if isinstance(value, (tuple, list)) else value
        out.add(_normal(str(path)))
    return out


def quantize_node_filter(keep_float: Iterable[str]) -> Callable[[Any], bool]:
    """The filter of the ``calls`` snippets: ``False`` for a node under a kept module, else ``True``.

    Every enclosing module is in a node's ``nn_module_stack``, so a set intersection finds a node
    anywhere under a kept module (``blocks.0`` keeps ``blocks.0.fc1``'s nodes too)."""
    keep = {k for k in keep_float if k}

    def quantize_node(node: Any) -> bool:
        return not keep & module_paths(node)

    return quantize_node

"""Keep-in-float recipes: which modules stay unquantized, as a JSON file a user applies in their own flow.

A recipe is the answer ``etlens fix`` writes (and ``etlens report --recipe`` reads)::

    {"format": "etlens-recipe", "version": 2, "backend": "xnnpack",
     "keep_float": ["blocks.0.fc1", "blocks.0.fc2"],
     "modules": [
       {"path": "blocks.0.fc1", "role": "culprit", "keeps_float": ["weights", "input", "output"],
        "why": "rank 1 by introduced error: ..."},
       {"path": "blocks.0.fc2", "role": "consumer", "of": "blocks.0.fc1", "keeps_float": ["weights", "input"],
        "why": "consumes blocks.0.fc1's output: ..."}],
     "apply": {"quantizer": "XNNPACKQuantizer", "method": "filter", "calls": "..."},
     "notes": {"snr_db": 36.1, ...}}

``keep_float`` holds *every* module the recipe keeps in float, as ``model.named_modules()`` spells
them: a plain module filter over it (leave unquantized every node whose ``node.meta["nn_module_stack"]``
passes through a listed module) is the whole recipe. ``modules`` says, per listed module, what stays
float (``weights``, its ``input`` activation, its ``output`` activation; measured on the quantized graph)
and why: a ``culprit`` introduces error int8 cannot hold; a ``consumer`` takes a culprit's output, and
quantizing it at the consumer's input would bring the error back (an activation culprit: one channel
near 1000 crushing the rest under one per-tensor scale), so the consumer is listed too and runs in
float, weights included. ``apply`` holds the toolchain's own calls
(:func:`etlens.builder.recipe_apply.how_to_apply`): XNNPACK's ``set_filter_function``, Arm's
``set_module_name(path, None)``, QNN's ``add_discard_nodes``. Version-1 files (``keep_float`` only)
still load.

:func:`keep_float_quantizer` wraps any pt2e quantizer (for a quantizer with no module filter of its
own): after the inner ``annotate`` it deletes the annotation of every node under a kept module (and
of the tail of its fused pattern: the ``relu`` after a kept ``linear`` carries the pattern's output
quantization even when it belongs to a shared ``self.act``), and drops the specs elsewhere that
share a kept node's quantization (``SharedQuantizationSpec`` pointing at it). XNNPACK's
``set_module_name(name, None)`` is not used: it asserts (DESIGN.md).

Example::

    from etlens.builder.recipe import Recipe, apply_recipe
    recipe = Recipe.load("recipe.json")                 # or Recipe(keep_float=["layers.7"])
    with apply_recipe(session, recipe) as v:            # re-lowered in the session's child
        v.build("out_keep/", runs=3)
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import EtlensError

__all__ = ["Recipe", "RECIPE_FORMAT", "RECIPE_VERSION", "KEPT", "keep_float_quantizer", "node_under", "apply_recipe",
           "check_paths", "unannotate", "recipe_quantizer", "kept_parts"]

#: the ``format`` field of a recipe file
RECIPE_FORMAT = "etlens-recipe"
#: the version ``save`` writes (1: ``keep_float`` only; 2: with ``modules`` and ``apply``)
RECIPE_VERSION = 2
#: what a listed module may keep in float, in the order ``keeps_float`` lists them
KEPT = ("weights", "input", "output")


@dataclass
class Recipe:
    """Modules to keep in float (``keep_float``: all of them), the backend it was made for, per-module
    details (``modules``: path, role, keeps_float, why), and free-form ``notes``."""

    keep_float: list[str] = field(default_factory=list)
    backend: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    modules: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        from .recipe_apply import how_to_apply

        how = how_to_apply(self.backend)
        return {"format": RECIPE_FORMAT, "version": RECIPE_VERSION, "backend": self.backend,
                "keep_float": list(self.keep_float), "modules": [dict(m) for m in self.modules],
                "apply": {"quantizer": how["quantizer"], "method": how["method"], "calls": how["calls"]},
                "notes": {k: _finite_or_none(v) for k, v in self.notes.items()}}

    def save(self, path: str) -> str:
        """Write the recipe as JSON to ``path`` (two-space indent, no NaN); return the path."""
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=2, allow_nan=False)
            f.write("\n")
        return path

    @classmethod
    def from_json(cls, doc: Any, *, source: str = "recipe") -> Recipe:
        """A recipe from its JSON document; a malformed one is an :class:`EtlensError` naming the field."""
        if isinstance(doc, list):  # a bare list of module paths is accepted too
            doc = {"keep_float": doc}
        if not isinstance(doc, dict):
            raise EtlensError(f"{source}: a recipe is a JSON object with a 'keep_float' list of module paths, "
                              f"got {type(doc).__name__}")
        fmt = doc.get("format", RECIPE_FORMAT)
        if fmt != RECIPE_FORMAT:
            raise EtlensError(f"{source}: 'format' is {fmt!r}, not {RECIPE_FORMAT!r} (not an etlens recipe; "
                              "write one with `etlens fix ... --recipe-out FILE`)")
        keep = doc.get("keep_float")
        if not isinstance(keep, list) or not all(isinstance(p, str) for p in keep):
            raise EtlensError(f"{source}: 'keep_float' must be a list of module paths (strings, as "
                              "model.named_modules() names them), e.g. [\"layers.3\"]")
        modules = doc.get("modules") or []
        if not isinstance(modules, list) or not all(isinstance(m, dict) and isinstance(m.get("path"), str)
                                                    for m in modules):
            raise EtlensError(f"{source}: 'modules' must be a list of objects with a 'path' (the module), "
                              "'keeps_float' and 'why'")
        keep = [p.strip() for p in keep if p.strip()]
        missing = [m["path"] for m in modules if m["path"] not in keep]
        if missing:
            raise EtlensError(f"{source}: 'modules' describes {', '.join(missing)}, which 'keep_float' does not "
                              "list (keep_float holds every module the recipe keeps in float)")
        notes = doc.get("notes") or {}
        backend = doc.get("backend")
        return cls(keep_float=keep, backend=backend if isinstance(backend, str) else None,
                   notes=notes if isinstance(notes, dict) else {}, modules=[dict(m) for m in modules])

    @classmethod
    def load(cls, path: str) -> Recipe:
        """Read a recipe file; a missing or malformed file is an :class:`EtlensError` naming it."""
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read(1 << 20)
        except OSError as exc:
            raise EtlensError(f"recipe {path}: cannot read it ({exc.strerror or exc})") from exc
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise EtlensError(f"recipe {path}: not valid JSON ({exc}); a recipe looks like "
                              "{\"keep_float\": [\"layers.3\"]}") from exc
        return cls.from_json(doc, source=f"recipe {path}")


def _stack_paths(node: Any) -> list[str]:
    stack = node.meta.get("nn_module_stack") or {}
    out = []
    for value in stack.values():
        path = value[0] if isinstance(value, (tuple, list)) else value
        out.append(_normal(str(path)))
    return out


def _normal(path: str) -> str:
    """``L['self'].layers[3]`` / ``layers.3`` / ``self.layers.3`` → ``layers.3``."""
    p = path.replace("L['self'].", "").replace("L['self']", "")
    if p.startswith("self."):
        p = p[5:]
    p = p.replace("[", ".").replace("]", "").replace("'", "").replace('"', "")
    while ".." in p:
        p = p.replace("..", ".")
    return p.strip(".")


def node_under(node: Any, keep: Iterable[str]) -> bool:
    """True when ``node`` comes from one of the ``keep`` modules (any entry of its module stack is a
    kept path or lies under one)."""
    keep = [k for k in keep if k]
    if not keep:
        return False
    for path in _stack_paths(node):
        for k in keep:
            if path == k or path.startswith(k + "."):
                return True
    return False


def _shares_with(spec: Any, kept: set[Any]) -> bool:
    target = getattr(spec, "edge_or_node", None)
    if target is None:
        return False
    items = target if isinstance(target, tuple) else (target,)
    return any(x in kept for x in items)


def unannotate(gm: Any, keep: Iterable[str]) -> int:
    """Remove the quantization annotations of every node under a ``keep`` module (with its fused
    tail) and the specs that share with those nodes; return how many nodes were left in float.

    This is a plain module filter applied after the quantizer's own ``annotate`` (for quantizers
    that have none): a consumer outside ``keep`` still quantizes the kept module's output at its
    own input. A recipe that needs that edge float lists the consumer too (``etlens fix`` does)."""
    keep = list(keep)
    kept: set[Any] = set()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node_under(node, keep):
            if node.meta.pop("quantization_annotation", None) is not None:
                kept.add(node)
    if not kept:
        return 0
    # the tail of a kept node's fused pattern (linear → relu annotated as one: the relu carries the
    # pattern's output quantization and takes its input unquantized) belongs to the kept node, even
    # when it comes from another module (a shared ``self.act``); a module filter skips the whole pattern
    grew = True
    while grew:
        grew = False
        for node in gm.graph.nodes:
            ann = node.meta.get("quantization_annotation")
            if (node.op == "call_function" and node not in kept and ann is not None and not ann.input_qspec_map
                    and any(a in kept for a in node.all_input_nodes)):
                node.meta.pop("quantization_annotation")
                kept.add(node)
                grew = True
    for node in gm.graph.nodes:
        ann = node.meta.get("quantization_annotation")
        if ann is None:
            continue
        for inp in list(ann.input_qspec_map):
            if _shares_with(ann.input_qspec_map[inp], kept):
                del ann.input_qspec_map[inp]
        if ann.output_qspec is not None and _shares_with(ann.output_qspec, kept):
            ann.output_qspec = None
    return len(kept)


def keep_float_quantizer(quantizer: Any, keep_float: Iterable[str]) -> Any:
    """A pt2e quantizer that annotates like ``quantizer`` but leaves the ``keep_float`` modules in float.

    Args:
        quantizer: a pt2e ``Quantizer``, or a backend name / :class:`~etlens.builder.backends.BackendConfig`
            whose quantizer is used (``"xnnpack"``, ``"cortex_m"``, an Ethos-U target).
        keep_float: module paths (``model.named_modules()`` names).
    """
    from torchao.quantization.pt2e.quantizer import Quantizer

    if not hasattr(quantizer, "annotate"):
        from .backends import get_backend

        cfg = get_backend(quantizer)
        if cfg.quantizer_factory is None:
            raise EtlensError(f"backend {cfg.name!r} has no quantizer: there is nothing to keep in float")
        quantizer = cfg.quantizer_factory()
    keep = [_normal(k) for k in keep_float]

    class KeepFloatQuantizer(Quantizer):
        """Delegates to the inner quantizer, then strips the annotations of the kept modules."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner
            self.keep_float = keep
            self.left_in_float = 0

        def transform_for_annotation(self, model: Any) -> Any:
            out = self.inner.transform_for_annotation(model)
            return out if out is not None else model

        def annotate(self, model: Any) -> Any:
            out = self.inner.annotate(model)
            gm = out if out is not None else model
            self.left_in_float = unannotate(gm, keep)
            return gm

        def validate(self, model: Any) -> None:
            return self.inner.validate(model)

        def prepare_obs_or_fq_callback(self, model: Any, edge_or_node_to_obs_or_fq: dict) -> None:
            return self.inner.prepare_obs_or_fq_callback(model, edge_or_node_to_obs_or_fq)

    return KeepFloatQuantizer(quantizer)


def check_paths(model: Any, keep_float: Iterable[str], *, source: str = "recipe") -> list[str]:
    """The ``keep_float`` paths, normalised; an :class:`EtlensError` names any that ``model`` lacks."""
    names = {n for n, _ in model.named_modules() if n}
    keep = [_normal(k) for k in keep_float]
    missing = [k for k in keep if k not in names]
    if missing:
        import difflib

        hints = []
        for k in missing[:3]:
            close = difflib.get_close_matches(k, sorted(names), n=3)
            hints.append(f"{k!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        raise EtlensError(f"{source}: keep_float names no module of this model: {'; '.join(hints)}; module paths "
                          "are model.named_modules() names such as "
                          f"{', '.join(sorted(names)[:4]) or '(the model has no submodules)'}")
    return keep


def recipe_quantizer(backend: Any, keep_float: Iterable[str], *, exported: Any = None) -> Any:
    """The backend's quantizer with ``keep_float`` applied the way the recipe file's ``apply`` calls
    say (:func:`etlens.builder.recipe_apply.how_to_apply`): what ``etlens fix`` simulates and lowers,
    and what a user's own script gets. A backend with no entry there gets :func:`keep_float_quantizer`.

    Args:
        backend: a build name or :class:`~etlens.builder.backends.BackendConfig` with a quantizer.
        keep_float: module paths (``model.named_modules()`` names).
        exported: the ``ExportedProgram`` the model is quantized from (the ``discard_nodes`` method
            names the nodes of its ``module()``).
    """
    from .backends import get_backend
    from .recipe_apply import how_to_apply, quantize_node_filter

    cfg = get_backend(backend)
    keep = [_normal(k) for k in keep_float if k]
    if cfg.quantizer_factory is None:
        raise EtlensError(f"backend {cfg.name!r} has no quantizer: there is nothing to keep in float")
    quantizer = cfg.quantizer_factory()
    if not keep:
        return quantizer
    method = how_to_apply(cfg.name)["method"]
    if method == "filter" and hasattr(quantizer, "set_filter_function"):
        quantizer.set_filter_function(quantize_node_filter(keep))
    elif method == "module_name_none" and hasattr(quantizer, "set_module_name"):
        for path in keep:
            quantizer.set_module_name(path, None)
    elif method == "discard_nodes" and hasattr(quantizer, "add_discard_nodes") and exported is not None:
        from .quantize import module_for_pt2e

        quantize_node = quantize_node_filter(keep)
        quantizer.add_discard_nodes([n.name for n in module_for_pt2e(exported).graph.nodes if not quantize_node(n)])
    else:
        return keep_float_quantizer(quantizer, keep)
    quantizer.keep_float = keep  # what the report's "built with a recipe" line reads
    return quantizer


def kept_parts(quantized: Any, model: Any, path: str) -> list[str]:
    """What module ``path`` keeps in float in the pt2e-converted ``quantized`` graph: ``weights`` (its
    parameters reach its ops without a dequantize), ``input`` (no activation input arrives through a
    dequantize: no int8 rounding before it), ``output`` (no user outside it quantizes what it produces);
    in :data:`KEPT` order."""
    nodes = [n for n in quantized.graph.nodes if n.op == "call_function" and node_under(n, [path])
             and not _is_qdq(n)]
    if not nodes:
        return []
    inside = set(nodes)
    out: list[str] = []
    try:
        has_weights = any(True for _ in model.get_submodule(path).parameters())
    except AttributeError:
        has_weights = False
    weights_q = any(_is_qdq(a) and any(b.op == "get_attr" for b in a.all_input_nodes)
                    for n in nodes for a in n.all_input_nodes)
    if has_weights and not weights_q:
        out.append("weights")
    acts = [a for n in nodes for a in n.all_input_nodes if a not in inside and a.op != "get_attr"]
    if not any(_is_qdq(a) and not any(b.op == "get_attr" for b in a.all_input_nodes) for a in acts):
        out.append("input")
    users = [u for n in nodes for u in n.users if u not in inside]
    if not any(_is_qdq(u) for u in users):
        out.append("output")
    return out


def _is_qdq(node: Any) -> bool:
    target = str(getattr(node, "target", ""))
    return node.op == "call_function" and ("quantize_per_" in target or "dequantize_per_" in target
                                           or "choose_qparams" in target)


def apply_recipe(session: Any, recipe: Recipe | str | Iterable[str], *, name: str | None = None) -> Any:
    """A variant of ``session`` (a :class:`~etlens.builder.session.BuildSession`) quantized with ``recipe``:
    its ``keep_float`` modules in float (applied as the recipe's ``apply`` calls do), the rest as the
    backend quantizes. Close it when done (the session's worker child keeps running).

    ``recipe``: a :class:`Recipe`, a recipe file path, or a list of module paths.
    """
    if isinstance(recipe, str):
        recipe = Recipe.load(recipe)
    elif not isinstance(recipe, Recipe):
        recipe = Recipe(keep_float=list(recipe))
    keep = check_paths(session.model, recipe.keep_float)
    quantizer = recipe_quantizer(session.config, keep, exported=session.exported)
    return session.variant(quantizer=quantizer, name=name or session.name)


def _finite_or_none(v: Any) -> Any:
    """A note as JSON holds it: an infinite SNR (the output equals the float model's) or NaN is ``null``."""
    return None if isinstance(v, float) and not math.isfinite(v) else v

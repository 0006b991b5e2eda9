"""Keep-in-float recipes: which modules stay unquantized, as a small JSON file any backend applies.

A recipe is the answer ``etlens fix`` writes (and ``etlens report --recipe`` reads)::

    {"format": "etlens-recipe", "version": 1, "backend": "xnnpack",
     "keep_float": ["layers.7", "encoder.attn.out_proj"]}

``keep_float`` holds ``nn.Module`` paths as ``model.named_modules()`` spells them. Every node
whose ``node.meta["nn_module_stack"]`` passes through such a module (the module itself or anything
under it, ``path`` or ``path.*``) keeps no quantization annotation, so pt2e inserts no
quantize/dequantize around it and the backend runs it in float.

It works on any pt2e quantizer (XNNPACK, Cortex-M, Ethos-U) the same way: :func:`keep_float_quantizer`
wraps the backend's quantizer; after the inner ``annotate`` it deletes the annotation of every node
under a kept module (and of the tail of its fused pattern: the ``relu`` after a kept ``linear``
carries the pattern's output quantization even when it belongs to a shared ``self.act``), and drops
the specs elsewhere that share a kept node's quantization (``SharedQuantizationSpec`` pointing at it).

The kept module's output stays float up to its consumers: a consumer (the next ``linear``) would
otherwise quantize it again at its own input, and an activation culprit (one channel near 1000
crushing the rest under one per-tensor scale) would do the same damage there as at the producer.
So a consumer of a kept node (directly, or through ops the quantizer leaves in float, such as a
GELU) loses its input specs: it runs in float, weights included (XNNPACK cannot run a float
activation against int8 weights; its runtime refuses the graph), and quantizes its output as
before. Keeping ``layers.2`` in float thus also runs ``layers.3``'s matmul in float; the recipe
names only ``layers.2``. XNNPACK's ``set_module_name(name, None)`` is not used: it asserts
(DESIGN.md).

Example::

    from etlens.builder.recipe import Recipe, keep_float_quantizer
    recipe = Recipe.load("recipe.json")                 # or Recipe(keep_float=["layers.7"])
    q = keep_float_quantizer("xnnpack", recipe.keep_float)
    with session.variant(quantizer=q, name="keep") as v:   # re-lowered in the session's child
        v.build("out_keep/", runs=3)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import EtlensError

__all__ = ["Recipe", "RECIPE_FORMAT", "keep_float_quantizer", "node_under", "apply_recipe", "check_paths",
           "unannotate"]

#: the ``format`` field of a recipe file
RECIPE_FORMAT = "etlens-recipe"


@dataclass
class Recipe:
    """Modules to keep in float (``keep_float``), the backend it was made for, and free-form ``notes``."""

    keep_float: list[str] = field(default_factory=list)
    backend: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"format": RECIPE_FORMAT, "version": 1, "backend": self.backend, "keep_float": list(self.keep_float),
                "notes": self.notes}

    def save(self, path: str) -> str:
        """Write the recipe as JSON to ``path``; return the path."""
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=2)
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
        notes = doc.get("notes") or {}
        backend = doc.get("backend")
        return cls(keep_float=[p.strip() for p in keep if p.strip()], backend=backend if isinstance(backend, str)
                   else None, notes=notes if isinstance(notes, dict) else {})

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
    tail), the specs that share with those nodes, and the input specs of their consumers (see the
    module docstring); return how many nodes were left in float."""
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
    # when it comes from another module (a shared ``self.act``)
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
    # what the kept nodes feed through ops the quantizer leaves in float anyway (a GELU, a view on
    # XNNPACK) is still the kept module's float output
    region = set(kept)
    for node in gm.graph.nodes:
        if (node.op == "call_function" and node not in region and node.meta.get("quantization_annotation") is None
                and any(a in region for a in node.all_input_nodes)):
            region.add(node)
    for node in gm.graph.nodes:
        ann = node.meta.get("quantization_annotation")
        if ann is None:
            continue
        if any(inp in region for inp in ann.input_qspec_map):
            # a consumer re-quantizing a kept node's output at its own input would bring the error
            # back (an activation outlier crushed there instead of at the producer): the edge stays
            # float, and so do the consumer's other inputs (its weights): XNNPACK cannot run a float
            # activation against int8 weights (the runtime refuses it: unsupported parameter). Its
            # output quantization stays: what follows it is int8 again.
            ann.input_qspec_map.clear()
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


def apply_recipe(session: Any, recipe: Recipe | str | Iterable[str], *, name: str | None = None) -> Any:
    """A variant of ``session`` (a :class:`~etlens.builder.session.BuildSession`) quantized with ``recipe``:
    its ``keep_float`` modules in float, the rest as the backend quantizes. Close it when done (the
    session's worker child keeps running).

    ``recipe``: a :class:`Recipe`, a recipe file path, or a list of module paths.
    """
    if isinstance(recipe, str):
        recipe = Recipe.load(recipe)
    elif not isinstance(recipe, Recipe):
        recipe = Recipe(keep_float=list(recipe))
    keep = check_paths(session.model, recipe.keep_float)
    quantizer = keep_float_quantizer(session.config, keep)
    return session.variant(quantizer=quantizer, name=name or session.name)

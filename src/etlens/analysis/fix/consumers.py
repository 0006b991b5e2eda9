"""Who re-quantizes a kept module's output, and what a recipe writes down about each module it lists.

Keeping a culprit in float is not enough when its *output* is what int8 cannot hold (an activation
culprit: one channel near 1000 crushing the rest under one per-tensor scale): the next quantized
op quantizes the same tensor again at its own input, and the damage comes back there. In a
transformer block the culprit is ``fc1``'s output, which the GELU passes on (in float) to ``fc2``:
a recipe that keeps only ``fc1`` recovers a fraction of the error; ``fc1`` and ``fc2`` recover it all. Under a
quantizer that annotates the GELU too (Qualcomm's, Arm's), the GELU module is a consumer as well, and
``fc2`` is found through it.

:func:`find_consumers` walks the annotated graph (the backend's quantizer with the kept modules
already filtered out) from a kept module's nodes through the ops the quantizer leaves unannotated
(a GELU, a view) to the first ops that quantize the tensor, and names their modules: the
*consumers*. ``etlens fix`` tries each top-k culprit set with and without its consumers (a weight
culprit needs none), counting every listed module in the budget.

:func:`describe_modules` writes the recipe's ``modules`` entries: per listed module what stays float
(measured on the quantized graph) and why.

Example::

    gm = annotated_module(session.exported, recipe_quantizer(session.config, ["blocks.0.fc1"]))
    find_consumers(gm, ["blocks.0.fc1"], session.model)   # {"blocks.0.fc2": "blocks.0.fc1"}
"""

from __future__ import annotations

import math
from typing import Any, Iterable

__all__ = ["annotated_module", "find_consumers", "describe_modules", "budget_cost"]


def annotated_module(exported: Any, quantizer: Any) -> Any:
    """``exported``'s module annotated by ``quantizer`` (its transform and ``annotate``, as
    ``prepare_pt2e`` starts): no observers, no calibration."""
    from ...builder.quantize import integer_safe, module_for_pt2e

    gm = module_for_pt2e(exported)
    q = integer_safe(quantizer)
    out = q.transform_for_annotation(gm)
    gm = out if out is not None else gm
    out = q.annotate(gm)
    return out if out is not None else gm


def _innermost(node: Any) -> str:
    from ...builder.recipe_apply import module_paths

    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    paths = sorted(module_paths(node), key=len)
    return paths[-1] if paths else ""


def _is_leaf(model: Any, path: str) -> bool:
    try:
        mod = model.get_submodule(path)
    except AttributeError:
        return False
    return not any(True for _ in mod.children())


def find_consumers(gm: Any, keep: Iterable[str], model: Any) -> dict[str, str]:
    """``{consumer module: kept module whose output it quantizes}`` in the annotated ``gm``.

    From each kept module's nodes, follow users through unannotated ops (they run in float and pass
    the float tensor on); an annotated user quantizes the tensor (at its input, or at its output when
    it fuses with it): its innermost module is a consumer when it is a leaf module not already kept (a
    residual ``add`` of a block's own ``forward`` is not: listing the block would keep all of it). A
    consumer without weights (an activation module: Qualcomm's and Arm's quantizers annotate a GELU,
    XNNPACK's does not) passes the float tensor on, so the walk goes on through it to the next consumer."""
    from ...builder.recipe import node_under

    keep = [k for k in keep if k]
    found: dict[str, str] = {}
    calls: dict[str, int] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            p = _innermost(n)
            calls[p] = calls.get(p, 0) + 1
    for k in keep:
        start = [n for n in gm.graph.nodes if n.op == "call_function" and node_under(n, [k])]
        seen = set(start)
        stack = list(start)
        while stack:
            node = stack.pop()
            for user in node.users:
                if user in seen or user.op != "call_function":
                    continue
                ann = user.meta.get("quantization_annotation")
                quantizes = ann is not None and (node in ann.input_qspec_map or ann.output_qspec is not None)
                if not quantizes:
                    seen.add(user)
                    stack.append(user)
                    continue
                path = _innermost(user)
                if path and not node_under(user, keep) and _is_leaf(model, path):
                    found.setdefault(path, k)
                    if not _has_weights(model, path) and calls.get(path, 0) == 1:
                        # an activation module (GELU, SiLU) the quantizer annotates: kept float, it passes
                        # the same float tensor on, and its users quantize it again (a module called at
                        # several places, one ReLU shared by every layer, is not walked through)
                        seen.add(user)
                        stack.append(user)
    return found


def budget_cost(model: Any, keep: Iterable[str]) -> int:
    """How much of the float budget ``keep`` takes: every module with weights it keeps in float
    (culprits and consumers alike; a listed container such as a whole block counts every weighted
    module inside it). An activation module kept so the float tensor passes through it has no
    weights (no bytes; its float op is what the quantizer was told to leave alone) and takes none."""
    kept: set[str] = set()
    for k in keep:
        try:
            root = model.get_submodule(k)
        except AttributeError:
            kept.add(k)  # not a module path of this model: counted as one
            continue
        for name, mod in root.named_modules(prefix=k):
            if any(True for _ in mod.parameters(recurse=False)):
                kept.add(name)
    return len(kept)


def _has_weights(model: Any, path: str) -> bool:
    try:
        return any(True for _ in model.get_submodule(path).parameters())
    except AttributeError:
        return True


def describe_modules(keep: list[str], consumers: dict[str, str], culprits: list[Any], quantized: Any, model: Any,
                     backend: str | None) -> list[dict[str, Any]]:
    """The recipe's ``modules``: ``path``, ``role`` (culprit / consumer), ``of`` (a consumer's kept
    producer), ``keeps_float`` (measured on ``quantized``, the converted graph of this recipe) and ``why``."""
    from ...builder.recipe import kept_parts
    from ...builder.recipe_apply import how_to_apply

    rows: dict[str, Any] = {}
    total = sum(r.introduced for r in culprits if math.isfinite(r.introduced)) or 1.0
    for r in culprits:
        if r.module_path and r.module_path not in rows:
            rows[r.module_path] = r
    out = []
    for path in keep:
        parts = kept_parts(quantized, model, path)
        entry: dict[str, Any] = {"path": path}
        if path in consumers:
            src = consumers[path]
            entry.update(role="consumer", of=src)
            why = (f"consumes {src}'s output: quantizing it at this module's input would bring back the error "
                   f"int8 cannot hold in {src}'s output, so its input stays float and it runs in float")
            if "weights" in parts:
                why += f" ({how_to_apply(backend)['consumer_weights']})"
        else:
            entry["role"] = "culprit"
            r = rows.get(path)
            if r is not None:
                snr = "" if not math.isfinite(r.introduced_snr_db) else f", {r.introduced_snr_db:.1f} dB"
                why = (f"rank {r.rank} by introduced error: its own int8 error alone takes the output to "
                       f"{r.introduced:.3g} NSR{snr} ({r.introduced / total:.0%} of the summed introduced error)")
            else:
                why = "its quantization introduces error int8 cannot hold"
        entry["keeps_float"] = parts
        entry["why"] = why
        out.append(entry)
    return out

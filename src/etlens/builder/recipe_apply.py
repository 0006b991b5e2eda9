"""Applying a keep-in-float recipe the toolchain's own way: the calls a user writes, and etlens makes.

A recipe's ``keep_float`` lists every module it keeps in float (culprits and the consumers whose
input stays float with them). Each toolchain's pt2e quantizer has its own way to leave modules
unquantized; :data:`HOW_TO_APPLY` holds, per build name, the exact calls (the ``apply`` block
of a recipe file and of ``docs/fix.md``) and which of three mechanisms they use:

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

__all__ = ["HOW_TO_APPLY", "how_to_apply", "quantize_node_filter", "module_paths"]

_LOAD = '''import json

keep = set(json.load(open("recipe.json"))["keep_float"])


def quantize_node(node):  # False for a node of a module the recipe keeps in float
    stack = node.meta.get("nn_module_stack", {})
    return not keep & {path.removeprefix("L['self'].") for path, _ in stack.values()}
'''

_XNNPACK = _LOAD + '''

from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer, get_symmetric_quantization_config)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
quantizer.set_filter_function(quantize_node)
prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
prepared(*inputs)                                    # calibrate
quantized = convert_pt2e(prepared)                   # then export and lower as usual (XnnpackPartitioner)
'''

_ARM = '''import json

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

_QNN = _LOAD + '''

from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

gm = torch.export.export(model, inputs).module()
quantizer = QnnQuantizer()                           # your backend / SoC / default quant config
quantizer.add_discard_nodes([n.name for n in gm.graph.nodes if not quantize_node(n)])
prepared = prepare_pt2e(gm, quantizer)
prepared(*inputs)                                    # calibrate
quantized = convert_pt2e(prepared)                   # then export and lower as usual (QnnPartitioner)
'''

_XNNPACK_ENTRY = {
    "quantizer": "XNNPACKQuantizer",
    "method": "filter",
    "calls": _XNNPACK,
    "consumer_weights": "XNNPACK cannot run a float input against int8 weights (the runtime refuses the graph): "
                        "its weights stay float with its input",
}
_ARM_ENTRY = {
    "quantizer": "EthosUQuantizer (TOSAQuantizer)",
    "method": "module_name_none",
    "calls": _ARM,
    "consumer_weights": "the module is left unquantized as a whole; Ethos-U runs float ops on the CPU, not the NPU",
}

#: ``{build name: {"quantizer", "method", "calls", "consumer_weights"}}``: how each toolchain's own
#: quantizer leaves a recipe's modules in float (user-facing text: it names the toolchain's API).
HOW_TO_APPLY: dict[str, dict[str, str]] = {
    "xnnpack": _XNNPACK_ENTRY,
    "portable": _XNNPACK_ENTRY,   # etlens quantizes portable builds with XNNPACK's quantizer
    "qnn": {
        "quantizer": "QnnQuantizer",
        "method": "discard_nodes",
        "calls": _QNN,
        "consumer_weights": "the module is left unquantized as a whole (QNN runs it in float)",
    },
}
for _target in ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256"):
    HOW_TO_APPLY[_target] = {**_ARM_ENTRY, "calls": _ARM.replace("{target}", _target)}

_GENERIC = {
    "quantizer": "the backend's pt2e quantizer",
    "method": "unannotate",
    "calls": _LOAD + '''
# Your quantizer has no module filter: after its annotate(), remove the annotations of the kept
# modules' nodes (what etlens.builder.recipe.keep_float_quantizer does):
#     for node in gm.graph.nodes:
#         if not quantize_node(node):
#             node.meta.pop("quantization_annotation", None)
''',
    "consumer_weights": "the module is left unquantized as a whole",
}


def how_to_apply(backend: str | None) -> dict[str, str]:
    """The entry of :data:`HOW_TO_APPLY` for ``backend`` (a build name), or the generic one."""
    return HOW_TO_APPLY.get(backend or "", _GENERIC)


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

"""Readers: one module per format, all producing :mod:`etlens.model` objects.

Use :func:`read` for a file of any supported kind; the format is chosen by its magic bytes.
"""

from typing import Any

from .base import Artifact
from .registry import READERS, ReaderSpec, read, read_object, sniff

__all__ = ["Artifact", "READERS", "ReaderSpec", "read", "read_object", "sniff",
           # functions for analyses (imported on first use, see _HELPERS)
           "target_name", "parse_nn_module_stack", "split_module_entry", "rewrite_edge_targets",
           "ensure_quant_ops",
           # the FlatBuffer table reader, for backends' payload decoders (etlens/backends/<name>/payload.py)
           "FlatBuffer", "Table"]

# -- public functions for analyses over fx graphs and serialized programs -------------------------------
#: name -> module of this package that defines it; imported on first access so ``import
#: etlens.readers`` stays cheap. ``target_name(target)``: readable operator name of an fx target;
#: ``parse_nn_module_stack(text)`` / ``split_module_entry(item)``: torch's serialized module stack;
#: ``rewrite_edge_targets(doc)``: edge-dialect targets of a program JSON -> plain torch ops (in place);
#: ``ensure_quant_ops()``: register the pt2e quantize/dequantize ops with torch.
_HELPERS = {
    "target_name": "._fx",
    "parse_nn_module_stack": "._export_json",
    "split_module_entry": "._export_json",
    "rewrite_edge_targets": "._torch_compat",
    "ensure_quant_ops": "._torch_compat",
    "FlatBuffer": "._flatbuffers",
    "Table": "._flatbuffers",
}


def __getattr__(name: str) -> Any:
    module = _HELPERS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

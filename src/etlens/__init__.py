"""etlens: make compiled PyTorch / ExecuTorch models understandable.

Read any ExecuTorch artifact (``.pt2``, ``.pte``, ``.etrecord``, ``.etdp`` + debug buffer, pass
traces) into one graph model, and see what the compiler did, where the time goes on the device
and where the numbers drift.

Public names are imported lazily so ``import etlens`` stays fast and does not load torch::

    import etlens
    art = etlens.read("model.pte")
    insp = etlens.Inspector(etdump_path="run.etdp", etrecord="model.etrecord")
    insp.to_dataframe()
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # model and readers
    "Graph": "etlens.model",
    "Node": "etlens.model",
    "TensorMeta": "etlens.model",
    "DelegateInfo": "etlens.model",
    "read": "etlens.readers",
    "read_object": "etlens.readers",
    "sniff": "etlens.readers",
    # errors
    "EtlensError": "etlens.errors",
    "FormatError": "etlens.errors",
    "MissingDataError": "etlens.errors",
    "UnsupportedFormatError": "etlens.errors",
    # inspector
    "Inspector": "etlens.compat",
    "Event": "etlens.analysis.inspector",
    "EventBlock": "etlens.analysis.inspector",
    "PerfData": "etlens.model.events",
    # delegation
    "get_delegation_info": "etlens.analysis.delegation",
    "format_delegated_graph": "etlens.analysis.delegation",
    "print_delegated_graph": "etlens.analysis.delegation",
    # viewer
    "generate_html": "etlens.compat",
    "generate_multi_pass_html": "etlens.compat",
    "extract_from_pte": "etlens.compat",
    "extract_from_etrecord": "etlens.compat",
    "extract_from_exported_program": "etlens.compat",
    "visualize_edge_manager": "etlens.compat",
    # notebook display (etlens.views.notebook)
    "show": "etlens.compat",
    # pass tracer
    "trace_passes": "etlens.builder.traced",
    "register_backend": "etlens.builder.backends",
    "BackendConfig": "etlens.builder.backends",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'etlens' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


def _register_notebook_display() -> None:
    """Inside a running IPython kernel (Jupyter, JupyterLab, VS Code, Colab) etlens objects display as their
    offline page (:mod:`etlens.views.notebook` says how and why); elsewhere nothing is imported."""
    import sys

    if "IPython" not in sys.modules:
        return
    try:
        from .views.notebook import register_formatters

        register_formatters()
    except Exception:  # a display hook must never make `import etlens` fail
        pass


_register_notebook_display()

"""What a backend took and what it left to the portable kernels, and why (public surface).

* :mod:`.core` — :func:`get_delegation_info` (ExecuTorch-compatible) and the text renderings;
  :func:`resolve_program` (any program, artifact or path → graph + fx objects, cached per file) is
  re-exported from where files are read, :mod:`etlens.readers.program` (with the rebuild of the
  lowered program from an ETRecord's maps, :mod:`etlens.readers.etrecord_lowered`);
* :mod:`.reasons` — replay a partitioner's support checks to say why a node stayed out.
"""

from .core import (
                   KNOWN_BACKENDS,
                   DelegationBreakdown,
                   DelegationInfo,
                   NonDelegatedNode,
                   ProgramResolver,
                   ResolvedProgram,
                   default_resolver,
                   delegation_graph,
                   format_delegated_graph,
                   format_graph_text,
                   get_delegation_info,
                   info_from_graph,
                   print_delegated_graph,
                   resolve_program,
)

__all__ = [
    "DelegationBreakdown",
    "DelegationInfo",
    "NonDelegatedNode",
    "KNOWN_BACKENDS",
    "get_delegation_info",
    "format_delegated_graph",
    "print_delegated_graph",
    "delegation_graph",
    "info_from_graph",
    "format_graph_text",
    "ResolvedProgram",
    "ProgramResolver",
    "resolve_program",
    "default_resolver",
]

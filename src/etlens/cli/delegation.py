"""``etlens delegation ARTIFACT``: what each backend took and what fell back to the CPU kernels."""

from __future__ import annotations

from ._common import add_command
from .emit import emit
from .options import EXIT_OK, add_output


def register(sub) -> None:
    p = add_command(
        sub, "delegation",
        "delegation summary and per-operator table (.etrecord, .pte, .pt2, trace JSON)",
        "etlens delegation model.etrecord --format json",
        description="ExecuTorch's get_delegation_info numbers (subgraphs, delegated and non-delegated nodes, "
                    "per-operator table) plus the delegated share, per-backend breakdown and every fallback. "
                    "An .etrecord gives fx-level numbers (the lowered view is rebuilt from its delegate and "
                    "debug-handle maps); a .pte gives the backend's own (fused) operations.")
    p.add_argument("artifact", help=".etrecord, .pte, .pt2 or etlens trace/graph JSON")
    p.add_argument("--method", default=None, help="method of a multi-method program (default: forward)")
    p.add_argument("--recorded", action="store_true",
                   help="ETRecord: count the stored edge program as ExecuTorch does (before partitioning) "
                        "instead of the rebuilt lowered view")
    p.add_argument("--graph", action="store_true", help="also print the graph with each delegate expanded")
    p.add_argument("--why", choices=("xnnpack",), default=None,
                   help="ask this partitioner why each fallback was not delegated (.etrecord; needs executorch)")
    add_output(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.delegation import format_delegated_graph, get_delegation_info

    partitioner = _partitioner(args.why) if args.why else None
    info = get_delegation_info(args.artifact, method=args.method, partitioner=partitioner,
                               etrecord_view="recorded" if args.recorded else "lowered")
    data = info.to_dict()
    data["artifact"] = args.artifact
    data["delegated"] = info.num_delegated_subgraphs > 0
    if not data["delegated"]:
        data["message"] = _no_delegates(args.artifact, info)
    found = _estimates(args)
    for _, est in found:  # e.g. an Ethos-U build: one row per ATen node + Vela's totals (MODEL.vela.json)
        data.update(est.to_json())

    def text() -> str:
        out = info.format_report()
        if info.num_delegated_subgraphs == 0:
            out = _no_delegates(args.artifact, info) + "\n\n" + out
        if args.graph:
            out += "\n" + format_delegated_graph(args.artifact, method=args.method)
        for backend, est in found:
            from ..backends import hook

            fmt = getattr(hook(backend, "text"), "format_delegation", None)
            if fmt is not None:
                out += "\n" + fmt(est)
        return out

    # CSV/TSV: ExecuTorch's per-operator table, with the Total row
    emit(args, doc=data, rows=info.get_operator_delegation_dataframe, text=text)
    return EXIT_OK


def _estimates(args) -> list:
    """``[(backend, estimates)]`` from every backend whose ``delegation`` hook knows this ETRecord (Ethos-U:
    Vela's per-node estimates when its sidecar sits beside it)."""
    if args.recorded or not str(args.artifact).endswith(".etrecord"):
        return []
    from ..backends import hooks

    out = []
    for backend, delegation in hooks("delegation"):
        estimates = getattr(delegation, "estimates", None)
        est = estimates(args.artifact, method=args.method) if estimates else None
        if est is not None:
            out.append((backend, est))
    return out


def _no_delegates(path: str, info) -> str:
    n = info.num_non_delegated_nodes
    return (f"No delegates in {path}: nothing was lowered to a backend; all {n} counted node(s) run on "
            "ExecuTorch's kernels." + (f" ({info.notes[0]})" if info.notes else ""))


def _partitioner(name: str):
    """The partitioner ``--why`` asks for reasons: XNNPACK's, from its BackendConfig."""
    from ..errors import BackendUnavailableError
    from ..builder.backends import get_backend

    backend = get_backend("xnnpack")
    try:
        backend.check_available()
        return backend.partitioners()[0]
    except BackendUnavailableError as exc:
        raise BackendUnavailableError(f"--why {name} needs the XNNPACK partitioner from ExecuTorch: {exc}") from exc

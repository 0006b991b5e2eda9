"""Public entry points of the viewer (see :mod:`etlens.views.html`)."""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from ...errors import EtlensError
from ...model import Graph
from ...model.transforms import inlined_graph
from .passes import normalize_snapshots, passes_payload
from .payload import Strings, graph_payload
from .payload_types import PAYLOAD_VERSION, OverlayScale, Payload
from .render import render_page, write_html

__all__ = [
    "generate_html",
    "generate_multi_pass_html",
    "generate_compare_html",
    "graph_page",
    "passes_page",
    "compare_page",
    "as_graph",
]


def as_graph(obj: Any, what: str = "graph_data") -> Graph:
    """A :class:`Graph` from a Graph, its JSON dict or an artifact (its first graph).

    In-memory programs (``ExportedProgram``, ``GraphModule``) are read by the facade
    (:func:`etlens.generate_html`, :func:`etlens.extract_from_exported_program`), not here."""
    if isinstance(obj, Graph):
        return obj
    if isinstance(obj, dict) and obj.get("schema") == Graph.SCHEMA:
        return Graph.from_json(obj)
    if hasattr(obj, "graphs") and callable(obj.graphs):
        graphs = obj.graphs()
        if graphs:
            return next(iter(graphs.values()))
    raise EtlensError(f"{what}: expected an etlens Graph (or its JSON or an artifact), got {type(obj).__name__}; "
                      "for an ExportedProgram use etlens.generate_html or etlens.extract_from_exported_program")


def _overlay_meta(values: Iterable[float | None], label: str | None) -> OverlayScale:
    finite = [v for v in values if v is not None]
    if not finite:
        return {"label": label or "value", "min": 0.0, "max": 1.0}
    return {"label": label or "value", "min": min(finite), "max": max(finite)}


def generate_html(graph_data: Any, path: str | os.PathLike, *, overlay: Mapping[str, Any] | None = None,
                  overlay_label: str | None = None, title: str | None = None) -> str:
    """Write one graph as a self-contained HTML page; returns the path.

    ``graph_data`` is a :class:`Graph` (or anything :func:`as_graph` accepts). ``overlay`` maps node
    names to numbers (latency, numeric gap …); nodes are coloured on a scale with a legend titled
    ``overlay_label`` and the value is printed on each node. A dict/list of several graphs opens
    the side-by-side compare view instead.
    """
    return write_html(graph_page(graph_data, overlay=overlay, overlay_label=overlay_label, title=title), path)


def graph_page(graph_data: Any, *, overlay: Mapping[str, Any] | None = None, overlay_label: str | None = None,
               title: str | None = None) -> str:
    """The page :func:`generate_html` writes, as a string (the notebook display embeds it)."""
    if isinstance(graph_data, (list, tuple)) or (isinstance(graph_data, dict) and "schema" not in graph_data
                                                 and all(isinstance(v, Graph) for v in graph_data.values())):
        return compare_page(graph_data, title=title)
    graph = as_graph(graph_data)
    strings = Strings()
    gp = graph_payload(graph, strings, overlay=dict(overlay) if overlay is not None else None)
    payload: Payload = {"version": PAYLOAD_VERSION, "mode": "single", "title": title or graph.name,
                        "graphs": [gp], "strings": strings.table}
    if overlay is not None:
        payload["overlay"] = _overlay_meta(gp["nodes"]["overlay"], overlay_label)
    return render_page(payload)


def generate_multi_pass_html(trace: Any, path: str | os.PathLike, *, title: str | None = None) -> str:
    """Write a pass-by-pass stepper for ``trace``; returns the path.

    ``trace`` is the tracer's trace object (anything with ``.snapshots``), an artifact with
    ``.trace``, the trace JSON dict, or a list of ``(name, Graph)`` pairs (diffs are then computed
    with :func:`etlens.model.diff.diff_graphs`). Positions stay fixed across passes; added, rewritten
    and removed nodes are marked; a failed pass shows a banner with its traceback.
    """
    return write_html(passes_page(trace, title=title), path)


def passes_page(trace: Any, *, title: str | None = None) -> str:
    """The page :func:`generate_multi_pass_html` writes, as a string."""
    snaps = normalize_snapshots(trace)
    strings = Strings()
    gp = passes_payload(snaps, strings)
    name = title or _get_title(trace) or snaps[-1].graph.name
    payload: Payload = {"version": PAYLOAD_VERSION, "mode": "passes", "title": name, "graphs": [gp],
                        "strings": strings.table}
    return render_page(payload)


def _get_title(trace: Any) -> str | None:
    for obj in (trace, getattr(trace, "trace", None)):
        if obj is None:
            continue
        model = obj.get("model") if isinstance(obj, dict) else getattr(obj, "model", None)
        backend = obj.get("backend") if isinstance(obj, dict) else getattr(obj, "backend", None)
        if isinstance(model, str) and model:
            return f"{model} · {backend}" if isinstance(backend, str) and backend else model
    return None


def _named_graphs(graphs: Any) -> list[tuple[str, Graph]]:
    if isinstance(graphs, Mapping):
        items = list(graphs.items())
    else:
        items = [(g.name, g) if isinstance(g, Graph) else (str(g[0]), g[1]) for g in graphs]
    out = [(str(k), as_graph(g)) for k, g in items]
    if not out:
        raise EtlensError("generate_compare_html: no graphs given")
    return out


def _match_with_inner(ga: Graph, gb: Graph, match_nodes) -> dict[str, list[str]]:
    """:func:`match_nodes` over both graphs with delegate subgraphs inlined; a delegate call also
    answers for everything its subgraph matched (so ATen ``linear`` finds the XNNPACK call)."""
    fa, fb = inlined_graph(ga), inlined_graph(gb)
    m = match_nodes(fa, fb)
    inner_b = {n.name for n in fb if "/" in n.name and n.name not in gb}
    if inner_b:
        for src, hits in m.items():
            extra = [h.split("/", 1)[0] for h in hits if h in inner_b]
            m[src] = list(dict.fromkeys(hits + extra))
    for n in fa:
        if "/" in n.name and n.name not in ga:
            call = n.name.split("/", 1)[0]
            m[call] = list(dict.fromkeys(m.get(call, []) + m.get(n.name, [])))
    return m


def generate_compare_html(graphs: Any, path: str | os.PathLike, *, title: str | None = None) -> str:
    """Write N graphs side by side (e.g. ATen → edge → lowered); returns the path.

    Selecting a node in one pane highlights and centres the nodes that represent it in the others,
    matched by lineage (``from_node`` root), then shared debug handles, then name
    (:func:`etlens.model.diff.match_nodes`).
    """
    return write_html(compare_page(graphs, title=title), path)


def compare_page(graphs: Any, *, title: str | None = None, overlays: Any = None,
                 overlay_label: str | None = None) -> str:
    """The page :func:`generate_compare_html` writes, as a string.

    ``overlays``: one ``{node name: number}`` per graph (or ``None``), coloured on one shared scale
    titled ``overlay_label`` (e.g. the time change of the ops two builds did differently).
    """
    from ...model.diff import match_nodes

    named = _named_graphs(graphs)
    strings = Strings()
    gps = []
    for i, (name, g) in enumerate(named):
        ov = overlays[i] if overlays is not None and i < len(overlays) else None
        gp = graph_payload(g, strings, overlay=dict(ov) if ov is not None else None)
        gp["name"] = strings(name)
        gps.append(gp)
    match: dict[str, list[int]] = {}
    if len(named) > 1:
        index = [{strings.table[s]: k for k, s in enumerate(gp["nodes"]["name"])} for gp in gps]
        raw = {(a, b): _match_with_inner(ga, gb, match_nodes)
               for a, (_, ga) in enumerate(named) for b, (_, gb) in enumerate(named) if a != b}
        for a in range(len(named)):
            for b in range(len(named)):
                if a == b:
                    continue
                # symmetric: lineage usually points from the newer graph back to the older one
                merged = {k: list(v) for k, v in raw[(a, b)].items()}
                for tgt, srcs in raw[(b, a)].items():
                    for src in srcs:
                        lst = merged.setdefault(src, [])
                        if tgt not in lst:
                            lst.append(tgt)
                flat: list[int] = []
                for src, hits in merged.items():
                    ids = [index[b][h] for h in hits if h in index[b]]
                    if ids and src in index[a]:
                        flat += [index[a][src], len(ids), *ids]
                match[f"{a},{b}"] = flat
    payload: Payload = {"version": PAYLOAD_VERSION, "mode": "compare",
                        "title": title or " → ".join(n for n, _ in named), "graphs": gps, "matches": match,
                        "strings": strings.table}
    if overlays is not None:
        payload["overlay"] = _overlay_meta([v for gp in gps for v in gp["nodes"].get("overlay") or []], overlay_label)
    return render_page(payload)

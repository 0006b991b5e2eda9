"""Rich notebook display: every etlens result shows inline as the same offline page etlens writes to disk.

In Jupyter, JupyterLab, VS Code and Colab a result object (a graph, a pass trace, a delegation
summary, a memory or size report, an LLM profile, a fleet comparison, the report, an Inspector)
renders as the page ``etlens`` would write for it, embedded as the document of a sandboxed frame::

    <div style="resize:vertical; height:600px">            (drag the corner to resize)
      <iframe sandbox="allow-scripts" srcdoc="<!doctype html>…the whole page, escaped…">
    </div>

The page keeps its Content-Security-Policy (inline script and style, ``data:`` images, no network,
no CDN), and ``sandbox="allow-scripts"`` without ``allow-same-origin`` gives it an opaque origin:
it can draw and handle clicks but cannot read the notebook, its cookies or its kernel. A plain
Python shell prints each object's one-line ``repr`` instead (``<etlens Graph 'forward': 1234
nodes, 3 delegates>``); that text is also the ``text/plain`` of every bundle, so a front end
that cannot show HTML (a terminal IPython, ``nbconvert --to markdown``) still says what it is.

How the HTML is attached, and why this way
------------------------------------------
The layers forbid the model and analysis classes from importing views (``tests/test_layers.py``),
so a ``Graph`` cannot carry a ``_repr_html_`` that builds the viewer. Instead:

* classes *below* views (``Graph``, ``Trace``, ``Artifact``, ``DelegationInfo``, ``MemoryReport``,
  ``SizeReport``, ``LlmProfile``, the fleet's ``CompareResult``) keep only a one-line ``__repr__``,
  and :func:`register_formatters` registers :func:`mimebundle` with IPython's *mimebundle*
  formatter **by class name** (``for_type_by_name``: nothing is imported for it). ``import etlens``
  calls it when IPython is already running (always so in a kernel), so nothing imports IPython
  otherwise. This is the formatter every IPython-kernel front end (Jupyter, JupyterLab, VS Code,
  Colab) asks, so all four get the same bundle;
* classes *above* views (the report's ``ReportResult``, the facade's ``Inspector``) define
  ``_repr_mimebundle_`` themselves, calling :func:`mimebundle` / :func:`frame_bundle`;
* anything else (a list of graphs, a DataFrame, a front end that is not an IPython kernel) goes
  through :func:`etlens.show`, which wraps the page in a :class:`Display` (an object with
  ``_repr_mimebundle_``) or, without IPython, writes the page to a temporary file.

Large graphs: the viewer's payload is columnar (one string table, integer columns), so the
``srcdoc`` of a 10k-node graph is a few MB, drawn with the viewer's level-of-detail renderer
(``tests/views/test_notebook_browser.py`` measures it interactive inside a notebook page).

Example::

    import etlens
    g = etlens.extract_from_pte("model.pte")
    g                                    # in a notebook: the viewer, inline
    etlens.show(g, height=800)           # explicit, taller
    print(repr(g))                       # <etlens Graph 'forward': 57 nodes, 1 delegate>
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from .page import esc as _e
from .page import page as _shell

__all__ = ["Display", "FORMATTED_TYPES", "mimebundle", "frame_bundle", "page_for", "frame_html", "text_line",
           "register_formatters", "running_ipython", "table_page", "html_active"]

#: (module, class) of the objects whose rich display :func:`register_formatters` installs
FORMATTED_TYPES: tuple[tuple[str, str], ...] = (
    ("etlens.model.graph", "Graph"),
    ("etlens.model.trace", "Trace"),
    ("etlens.readers.base", "Artifact"),
    ("etlens.analysis.delegation.core", "DelegationInfo"),
    ("etlens.analysis.memory", "MemoryReport"),
    ("etlens.analysis.size", "SizeReport"),
    ("etlens.analysis.llm", "LlmProfile"),
    ("etlens.fleet.compare", "CompareResult"),
    ("etlens.analysis.inspector.core", "Inspector"),
)

_CSS = ("body{margin:12px 16px;font:13px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#1f2937}"
        "h2{font-size:17px;margin:4px 0 8px}h3{font-size:14px;margin:14px 0 6px}.muted{color:#6b7280}"
        "table{border-collapse:collapse;font-size:12px}th{background:#f1f5f9;text-align:left;position:sticky;top:0}"
        "td,th{padding:3px 8px;border-bottom:1px solid #e5e7eb;vertical-align:top}td.n{text-align:right;"
        "font-variant-numeric:tabular-nums}.cards{display:flex;gap:10px;flex-wrap:wrap;margin:6px 0}"
        ".card{border:1px solid #e5e7eb;border-left:4px solid #1d4ed8;border-radius:6px;padding:6px 10px}"
        ".card b{display:block;font-size:18px}pre{background:#f1f5f9;padding:8px;border-radius:6px;overflow:auto}")


def _page(title: str, body: str, css: str = "") -> str:
    return _shell(title, body, css=_CSS + css, heading="h2")


def _num(v: Any) -> str:
    if isinstance(v, float):
        return "" if v != v else f"{v:.6g}"
    return _e(v)


def _table(header: list[str], rows: list[list[Any]], limit: int = 500) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td class='n'>{_num(c)}</td>" if isinstance(c, (int, float))
                                    and not isinstance(c, bool) else f"<td>{_e(c)}</td>" for c in r) + "</tr>"
                   for r in rows[:limit])
    more = f"<p class='muted'>… {len(rows) - limit} more rows</p>" if len(rows) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def table_page(df: Any, title: str = "table", limit: int = 500) -> str:
    """A DataFrame (first ``limit`` rows) as an offline page."""
    cols = [str(c) for c in df.columns]
    rows = [list(r) for r in df.head(limit).itertuples(index=False, name=None)]
    note = f"<p class='muted'>{len(df)} rows × {len(cols)} columns</p>"
    return _page(title, note + _table(cols, rows, limit))


# -- the pages ------------------------------------------------------------------------------------------------
def _graph_page(g: Any) -> str:
    from .html.api import graph_page

    return graph_page(g)


def _trace_page(t: Any) -> str:
    from .html.api import passes_page

    return passes_page(t)


def _artifact_page(a: Any) -> str:
    from .html.api import graph_page, passes_page

    if getattr(a, "trace", None) is not None:
        return passes_page(a)
    return graph_page(a.graph(), title=f"{a.format} · {a.graph_key()}")


def _delegation_page(d: Any) -> str:
    cards = [("delegated subgraphs", d.num_delegated_subgraphs), ("delegated nodes", d.num_delegated_nodes),
             ("non-delegated nodes", d.num_non_delegated_nodes)]
    body = ["<div class='cards'>" + "".join(f"<div class='card'>{_e(k)}<b>{v}</b></div>" for k, v in cards)
            + "</div>"]
    if d.source:
        body.append(f"<p class='muted'>{_e(d.source)}</p>")
    if d.backends:
        body.append("<h3>Backends</h3>" + _table(
            ["backend", "subgraphs", "delegated nodes"],
            [[b, v.get("subgraphs"), v.get("delegated_nodes")] for b, v in d.backends.items()]))
    ops = sorted(d.delegation_by_operator.values(), key=lambda b: (-(b.delegated + b.non_delegated), b.op_type))
    body.append("<h3>Per operator</h3>" + _table(
        ["op_type", "occurrences_in_delegated_graphs", "occurrences_in_non_delegated_graphs"],
        [[b.op_type, b.delegated, b.non_delegated] for b in ops]))
    if d.non_delegated:
        body.append("<h3>Left on the CPU, and why</h3>" + _table(
            ["node", "op_type", "reason"], [[n.name, n.op_type, n.reason or ""] for n in d.non_delegated]))
    if d.notes:
        body.append("<h3>Notes</h3><ul>" + "".join(f"<li>{_e(n)}</li>" for n in d.notes) + "</ul>")
    return _page("delegation summary", "".join(body))


def _memory_page(m: Any) -> str:
    from .memory_timeline import memory_page

    return memory_page(m)


def _size_page(s: Any) -> str:
    from .treemap import treemap_page

    return treemap_page(s)


def _llm_page(p: Any) -> str:
    from .llm import classes_svg, llm_text, runs_svg

    body = (f"<h3>Time per run</h3>{runs_svg(p)}<h3>Share of time per operator class</h3>{classes_svg(p)}"
            f"<h3>Numbers</h3><pre>{_e(llm_text(p))}</pre>")
    return _page(f"LLM view of '{p.method}'", body)


def _fleet_page(r: Any) -> str:
    from .fleet_pages import compare_html

    return compare_html(r)


def _inspector_page(insp: Any) -> str:
    from .tables import op_totals, summary_paragraph

    unit = insp.target_time_scale.value
    totals = op_totals(insp)
    grand = sum(t for _, t, _ in totals) or float("nan")
    rows = [[k, t, n, 100 * t / grand] for k, t, n in totals]
    blocks = [[b.name, len(b.runs), len(b)] for b in insp.block_columns]
    body = (f"<p>{_e(summary_paragraph(insp))}</p><h3>Time per operator (average per run, {_e(unit)})</h3>"
            + _table(["operator", f"total avg ({unit})", "events", "share %"], rows)
            + "<h3>Event blocks</h3>" + _table(["block", "runs", "events"], blocks)
            + "<p class='muted'>Every event: <code>inspector.to_dataframe()</code>; numeric drift: "
              "<code>inspector.calculate_numeric_gap()</code>.</p>")
    return _page("Inspector", body)


_PAGES: dict[str, tuple[Callable[[Any], str], int]] = {
    # class name -> (page builder, frame height in px)
    "Graph": (_graph_page, 600),
    "Trace": (_trace_page, 640),
    "Artifact": (_artifact_page, 600),
    "DelegationInfo": (_delegation_page, 480),
    "MemoryReport": (_memory_page, 640),
    "SizeReport": (_size_page, 760),
    "LlmProfile": (_llm_page, 620),
    "CompareResult": (_fleet_page, 700),
    "Inspector": (_inspector_page, 520),
}


def _kind(obj: Any) -> str | None:
    for cls in type(obj).__mro__:
        if (cls.__module__, cls.__name__) in FORMATTED_TYPES:
            return cls.__name__
    return None


def _is_graph_collection(obj: Any) -> bool:
    from ..model import Graph

    if isinstance(obj, dict):
        return bool(obj) and all(isinstance(v, Graph) for v in obj.values())
    return isinstance(obj, (list, tuple)) and bool(obj) and all(
        isinstance(g, Graph) or (isinstance(g, tuple) and len(g) == 2 and isinstance(g[1], Graph)) for g in obj)


def page_for(obj: Any, **options: Any) -> tuple[str, int]:
    """``(page, height)``: the offline page for ``obj`` and a frame height that suits it.

    Accepts everything in :data:`FORMATTED_TYPES`, a list/dict of graphs (the side-by-side view), a
    pandas DataFrame, or a complete HTML document (a ``str`` starting with ``<!doctype`` or ``<html``).
    ``options`` go to the graph viewer (``overlay=``, ``overlay_label=``, ``title=``; see
    :func:`etlens.views.html.generate_html`). Raises :class:`~etlens.errors.EtlensError` for anything else."""
    kind = _kind(obj)
    if options:
        if kind != "Graph":
            from ..errors import EtlensError

            raise EtlensError(f"etlens.show: options {sorted(options)} apply to a Graph, not a {type(obj).__name__}")
        from .html.api import graph_page

        return graph_page(obj, **options), _PAGES["Graph"][1]
    if kind is not None:
        build, height = _PAGES[kind]
        if kind == "MemoryReport":  # one chart per arena (or a line for a method without one)
            height = min(900, 110 + sum(max(len(m.arenas) * 400, 60) for m in obj.methods))
        return build(obj), height
    if _is_graph_collection(obj):
        from .html.api import compare_page

        return compare_page(obj), 640
    if type(obj).__name__ == "DataFrame" and hasattr(obj, "itertuples"):
        return table_page(obj), min(600, 90 + 24 * min(len(obj), 500))
    if isinstance(obj, str) and obj.lstrip()[:14].lower().startswith(("<!doctype", "<html")):
        return obj, 640
    from ..errors import EtlensError

    raise EtlensError(f"etlens.show: no inline view for a {type(obj).__name__}; it shows graphs, graph lists, "
                      "pass traces, artifacts, delegation/memory/size/LLM results, fleet comparisons, the report, "
                      "an Inspector, DataFrames and HTML pages")


def text_line(obj: Any) -> str:
    """The one-line text form (``text/plain``) of ``obj``."""
    if _is_graph_collection(obj):
        names = list(obj) if isinstance(obj, dict) else [g.name if hasattr(g, "name") else g[0] for g in obj]
        return f"<etlens {len(names)} graphs: {', '.join(map(str, names))}>"
    if type(obj).__name__ == "DataFrame" and hasattr(obj, "shape"):
        return f"<DataFrame: {obj.shape[0]} rows x {obj.shape[1]} columns>"
    if isinstance(obj, str):
        return f"<etlens page: {len(obj):,} characters>"
    if _kind(obj) == "Artifact":
        graphs = obj.graphs()
        where = f" {obj.path.replace(chr(92), '/').rsplit('/', 1)[-1]!r}" if obj.path else ""
        return f"<etlens {obj.format} artifact{where}: {len(graphs)} graph(s) ({', '.join(list(graphs)[:4])})>"
    text = repr(obj)
    return text if "\n" not in text else text.splitlines()[0] + " …"


def frame_html(page: str, *, height: int = 600, title: str = "etlens") -> str:
    """``page`` as the document of a sandboxed, resizable ``<iframe srcdoc>`` as wide as the cell.

    ``sandbox="allow-scripts"`` (no ``allow-same-origin``): the page runs its own script in an opaque
    origin and keeps its Content-Security-Policy; the wrapper ``div`` is resizable vertically."""
    height = max(120, int(height))
    return (f"<div class='etlens-frame' style='resize:vertical;overflow:hidden;height:{height}px;min-height:120px;"
            f"width:100%;box-sizing:border-box;border:1px solid #d0d7de;border-radius:4px'>"
            f"<iframe sandbox='allow-scripts' title='{_e(title)}' "
            f"style='width:100%;height:100%;border:0;display:block' "
            f"srcdoc=\"{_e(page)}\"></iframe></div>")


def frame_bundle(page: str, text: str, *, height: int = 600) -> dict[str, str]:
    """The ``{"text/html", "text/plain"}`` bundle for a page and its one-line text."""
    return {"text/html": frame_html(page, height=height, title=text), "text/plain": text}


def mimebundle(obj: Any, height: int | None = None) -> dict[str, str]:
    """The display bundle of ``obj`` (see :func:`page_for`): the framed page and its text line."""
    page, default = page_for(obj)
    return frame_bundle(page, text_line(obj), height=height or default)


class Display:
    """A page ready to show: ``_repr_mimebundle_`` gives the framed page and the one-line text.

    :func:`etlens.show` returns one when IPython is not there to display it (``display(d)`` later,
    or ``d.page`` for the HTML)."""

    def __init__(self, page: str, text: str, height: int = 600) -> None:
        self.page, self.text, self.height = page, text, height

    @classmethod
    def of(cls, obj: Any, height: int | None = None, **options: Any) -> "Display":
        page, default = page_for(obj, **options)
        return cls(page, text_line(obj), height or default)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return frame_bundle(self.page, self.text, height=self.height)

    def _repr_html_(self) -> str:
        return frame_html(self.page, height=self.height, title=self.text)

    def __repr__(self) -> str:
        return self.text


def running_ipython() -> Any:
    """The running IPython shell, or ``None`` (never imports IPython: only a shell already running counts)."""
    ipython = sys.modules.get("IPython")  # never imported here: only a shell that is already running counts
    if ipython is None:
        return None
    try:
        return ipython.get_ipython()
    except Exception:  # a half-initialised IPython: no rich display, nothing breaks
        return None


def _printer(obj: Any) -> dict[str, str] | None:
    try:
        return mimebundle(obj)
    except Exception as exc:  # a display must never break the cell: fall back to the text form
        print(f"etlens: no inline view ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def html_active(ip: Any) -> bool:
    """Whether shell ``ip`` shows ``text/html`` (a kernel front end) rather than text only (a terminal)."""
    fmt = getattr(ip, "display_formatter", None)
    active = getattr(fmt, "active_types", None)
    return fmt is not None and (active is None or "text/html" in active)


def register_formatters(ip: Any = None) -> bool:
    """Register :func:`mimebundle` for :data:`FORMATTED_TYPES` with IPython's display formatter.

    ``ip``: the shell (default: the running one, if any). Only shells that render HTML get it (a
    terminal IPython keeps the text form and pays nothing). Returns whether it registered.
    Registration is by name, so it imports none of the classes. Safe to call again."""
    ip = ip if ip is not None else running_ipython()
    formatter = getattr(getattr(ip, "display_formatter", None), "mimebundle_formatter", None)
    if formatter is None or not html_active(ip):
        return False
    for module, name in FORMATTED_TYPES:
        formatter.for_type_by_name(module, name, _printer)
    return True

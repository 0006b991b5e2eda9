"""The compatibility facade: ExecuTorch-compatible classes and functions that take *files*, toolchain
objects, or combine analyses with views.

This is the one module at the top layer that may import every other layer. Everything below it
takes model objects (:class:`etlens.model.Graph`, traces, analysis results): analysis never imports
views, views never open files. ``etlens.<name>`` re-exports what is here::

    import etlens
    etlens.generate_html(etlens.extract_from_pte("model.pte"), "model.html")
    etlens.generate_html(exported_program, "ep.html")      # in-memory programs are read here
    etlens.Inspector(etdump_path="run.etdp", etrecord="model.etrecord").print_data_tabular()

Each section below belongs to one compatible API; keep them delimited.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any, Mapping

from .analysis.inspector import Event, EventBlock, PerfData, RuntimeOutput, TimeScale
from .analysis.inspector import Inspector as _AnalysisInspector
from .errors import EtlensError
from .model import Graph
from .views.html import generate_compare_html, generate_multi_pass_html
from .views.html import generate_html as _generate_html_from_graphs

__all__ = [
    "generate_html",
    "generate_multi_pass_html",
    "generate_compare_html",
    "extract_from_pte",
    "extract_from_etrecord",
    "extract_from_exported_program",
    "visualize_edge_manager",
    "Inspector",
    "Event",
    "EventBlock",
    "PerfData",
    "TimeScale",
    "RuntimeOutput",
    "show",
]



# --- viewer compatibility functions ---------------------------------------------------------------
def extract_from_pte(pte_path: str | os.PathLike[str], method: str | None = None) -> Graph:
    """The graph of ``method`` (default ``forward``) in a ``.pte`` program."""
    from .readers import read

    return read(pte_path).graph(method, prefer=("forward",))


def extract_from_etrecord(etrecord_path: str | os.PathLike[str], stage: str | None = None) -> Graph:
    """One stage of an ETRecord (default: the edge-dialect ``forward``, else the first)."""
    from .readers import read

    return read(etrecord_path).graph(stage=stage, prefer=("edge_dialect_exported_program/forward",
                                                          "edge_dialect_exported_program", "forward"))


def extract_from_exported_program(exported_program: Any, name: str = "program") -> Graph:
    """The graph of an in-memory ``ExportedProgram`` or ``GraphModule``."""
    from .readers import read_object

    return read_object(exported_program, name=name).graph(prefer=("forward",))


def _is_program(obj: Any) -> bool:
    return hasattr(obj, "graph_module") or type(obj).__name__ in ("ExportedProgram", "GraphModule")


def _graph_of(obj: Any) -> Any:
    """An in-memory program read into a :class:`Graph`; anything else unchanged (the view checks it)."""
    return extract_from_exported_program(obj) if _is_program(obj) else obj


def generate_html(graph_data: Any, path: str | os.PathLike[str], *, overlay: Mapping[str, Any] | None = None,
                  overlay_label: str | None = None, title: str | None = None) -> str:
    """:func:`etlens.views.html.generate_html` that also takes ``ExportedProgram`` / ``GraphModule``
    objects (alone, or in the list/dict of graphs that opens the compare view); returns the path."""
    if isinstance(graph_data, (list, tuple)):
        graph_data = [(item[0], _graph_of(item[1])) if isinstance(item, tuple) and len(item) == 2
                      else _graph_of(item) for item in graph_data]
    elif isinstance(graph_data, dict) and "schema" not in graph_data:
        graph_data = {k: _graph_of(v) for k, v in graph_data.items()}
    else:
        graph_data = _graph_of(graph_data)
    return _generate_html_from_graphs(graph_data, path, overlay=overlay, overlay_label=overlay_label, title=title)


def visualize_edge_manager(edge_manager: Any, path: str | os.PathLike[str], method: str = "forward") -> str:
    """Write the graph of an ``EdgeProgramManager`` (after ``to_edge``/lowering) as HTML."""
    try:
        ep = edge_manager.exported_program(method)
    except TypeError:
        ep = edge_manager.exported_program()
    except AttributeError as exc:
        raise EtlensError(f"visualize_edge_manager: expected an EdgeProgramManager, got "
                          f"{type(edge_manager).__name__}") from exc
    return generate_html(extract_from_exported_program(ep, name=method), path, title=f"edge program · {method}")



# =====================================================================================================
# Inspector (drop-in for executorch.devtools.Inspector): the analysis class + the methods that
# render views (tables, TensorBoard, Perfetto). ``etlens.Inspector`` is this class.
# =====================================================================================================
class Inspector(_AnalysisInspector):
    """``etlens.Inspector``: :class:`etlens.analysis.inspector.Inspector` plus its compatible views.

    Everything about events, tables and numerics is inherited (see the base class for the
    arguments); this class adds the methods that print or write files: :meth:`print_data_tabular`,
    :meth:`write_tensorboard_artifact`, :meth:`write_perfetto_trace` and :meth:`summary_text`.
    """

    def print_data_tabular(self, file: IO[str] = sys.stdout, include_units: bool = True,
                           include_delegate_debug_data: bool = False) -> None:
        """Print the events as a table (``OPERATOR_CALL`` rows and bulky columns left out)."""
        from .views.tables import display_or_print_df

        display_or_print_df(self.printed_dataframe(include_units, include_delegate_debug_data), file)

    def write_tensorboard_artifact(self, path: str) -> None:
        """Write per-operator latency as a TensorBoard event file under directory ``path``."""
        from .views.tensorboard import write_tensorboard

        write_tensorboard(self, path)

    def write_perfetto_trace(self, path: str, *, by_node: bool | None = None) -> None:
        """Write a Chrome trace-event JSON timeline (open it in https://ui.perfetto.dev).

        ``by_node`` (default: when the inspector was given ``pte=``) names delegate-internal slices
        by the ATen node and module that ran them (see :meth:`attribution`).
        """
        from .views.perfetto import write_perfetto

        use = self.pte is not None if by_node is None else by_node
        write_perfetto(self, path, self.attribution() if use else None)

    def __repr__(self) -> str:
        """One line (a notebook shows the summary and per-operator table, see :mod:`etlens.views.notebook`)."""
        blocks = self.block_columns
        runs = sum(len(b.runs) for b in blocks)
        events = sum(len(b) for b in blocks)
        extras = ", ".join(x for x, ok in (("ETRecord", self.record is not None),
                                           ("debug buffer", self.has_debug_buffer)) if ok) or "no ETRecord"
        return f"<etlens Inspector: {len(blocks)} block(s), {runs} run(s), {events} events; {extras}>"

    def summary_text(self, top: int = 5) -> str:
        """One paragraph: total time per block, top operators, delegated share of time."""
        from .views.tables import summary_paragraph

        return summary_paragraph(self, top)

# ===================================================================================== end Inspector


# =====================================================================================================
# Notebook display: etlens.show (the rich display itself is etlens.views.notebook)
# =====================================================================================================
def show(obj: Any, *, height: int | None = None, **options: Any) -> Any:
    """Show ``obj`` as its offline page: inline in a notebook, else in a temporary HTML file.

    ``obj``: anything with a view (a Graph, a list/dict of graphs, a pass trace, an artifact, the
    delegation/memory/size/LLM results, a fleet comparison, a report result, an Inspector, a
    DataFrame, or the path of an ``.html`` page). ``height``: the frame's height in px (resizable
    anyway). ``options`` go to the graph viewer (``overlay={node: value}``, ``overlay_label=``, ``title=``).

    In an IPython kernel (Jupyter, JupyterLab, VS Code, Colab) it displays the sandboxed frame and
    returns ``None``. Anywhere else it writes the page to a temporary file, prints its path and
    returns the path (open it in a browser). Objects of etlens show themselves in a notebook
    without this call; ``show`` is for options, lists of graphs and other front ends.

    Example::

        etlens.show(graph, overlay={"aten_linear_default": 0.42}, overlay_label="ms", height=800)
    """
    import tempfile

    from .report import ReportResult
    from .views.notebook import Display, html_active, running_ipython

    if isinstance(obj, Display):
        shown = obj
    elif isinstance(obj, ReportResult):
        shown = Display(obj.page(), repr(obj), height or 820)
    elif isinstance(obj, (str, os.PathLike)) and os.fspath(obj).lower().endswith((".html", ".htm")):
        path = os.fspath(obj)
        if not os.path.isfile(path):
            raise EtlensError(f"etlens.show: {path}: no such file")
        with open(path, encoding="utf-8") as f:
            shown = Display(f.read(), f"<etlens page {os.path.basename(path)!r}>", height or 700)
    else:
        shown = Display.of(obj, height, **options)
    ip = running_ipython()
    if ip is not None and html_active(ip):
        from IPython.display import display

        display(shown)
        return None
    fd, path = tempfile.mkstemp(prefix="etlens-", suffix=".html")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(shown.page)
    print(f"{shown.text}: wrote {path} (open it in a browser)")
    return path


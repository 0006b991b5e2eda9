"""The offline graph viewer: one self-contained HTML file per graph, pass trace or comparison.

Everything the page needs (code, styles, data) is inline; it fetches nothing, so it opens from a
bug report, an e-mail attachment or a CI artifact, offline. The API keeps the seed visualizer's
names::

    from etlens.views.html import generate_html, generate_multi_pass_html, generate_compare_html

    generate_html(graph, "model.html")                       # graph: an etlens.model.Graph
    generate_html(graph, "lat.html", overlay={"aten_linear_default": 0.42}, overlay_label="latency (ms)")
    generate_multi_pass_html(trace, "passes.html")          # step through a pass trace
    generate_compare_html({"aten": g0, "edge": g1, "lowered": g2}, "compare.html")

The viewer reads only :mod:`etlens.model` graphs; which file a graph came from is the readers' job, and
the functions that take files or programs (``extract_from_pte``, ``visualize_edge_manager`` …) live in
the facade, :mod:`etlens.compat` (``etlens.extract_from_pte``).
"""

from .api import (
    generate_compare_html,
    generate_html,
    generate_multi_pass_html,
)

__all__ = [
    "generate_html",
    "generate_multi_pass_html",
    "generate_compare_html",
]

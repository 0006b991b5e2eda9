"""The module-time icicle: boxes nest by module path, widths follow time, names stay inert text."""

from __future__ import annotations

import re

from etlens.analysis.attribution import Attribution, NodeTime
from etlens.views.icicle import icicle_html, icicle_svg, icicle_tree


def _row(node, path, ms, inside=True, handles=(1,)):
    return NodeTime(node=node, debug_handles=handles, op=f"aten.{node}.default", module_path=path, in_module=True,
                    inside_delegate=inside, runs={0: ms, 1: ms})


def _att(rows, framework=0.1, overhead=0.2):
    n = 2
    return Attribution(rows=rows, events=[], execute_per_run=[10.0] * n, framework_per_run=[framework] * n,
                       delegate_per_run=[5.0] * n, delegate_internal_per_run=[4.0] * n,
                       delegate_overhead_per_run=[overhead] * n, attributed_per_run=[4.0] * n,
                       operator_per_run=[1.0] * n)


def test_tree_nests_modules_and_keeps_remainders_apart():
    att = _att([_row("linear", "layers.0.attn", 3.0), _row("gelu", "layers.0.mlp", 1.0, inside=False),
                _row("x", "", 0.5, handles=())])
    root = icicle_tree(att)
    layers = root.children["layers"]
    assert layers.value == 4.0 and layers.children["0"].children["attn"].value == 3.0
    assert root.children["unattributed"].value == 0.5 and root.children["unattributed"].kind == "overhead"
    assert root.children["framework"].value == 0.1 and root.children["delegate overhead"].value == 0.2
    assert abs(root.value - 4.8) < 1e-9
    assert layers.children["0"].children["mlp"].children["gelu"].kind == "kernel"


def test_svg_widths_follow_time_and_names_are_escaped():
    att = _att([_row("linear", "a", 3.0), _row("conv", "<script>alert(1)</script>", 1.0)], 0.0, 0.0)
    svg = icicle_svg(icicle_tree(att), width=400)
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    widths = {p: float(w) for p, w in re.findall(r"data-path='([^']*)'[^>]*>.*?width='([\d.]+)'", svg)}
    assert abs(widths["a"] - 299) < 1.5 and abs(widths["&lt;script&gt;alert(1)&lt;/script&gt;"] - 99) < 1.5
    assert "inside a delegate" in icicle_html(icicle_tree(att))

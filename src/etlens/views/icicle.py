"""Module-tree icicle of where the time goes: one offline SVG, drawn by etlens (no library).

The top band is the whole ``Method::execute``; below it the model's modules nest band by band
(``layers`` → ``layers.0`` → ``layers.0.attention`` …) down to the ATen nodes that ran, each box as
wide as its share of the time. Time spent inside a delegate lands in the module of the node that
ran it (see :mod:`etlens.analysis.attribution`); the framework tax, the delegate overhead and
whatever could not be attributed are boxes of their own under the root, never spread over modules.
Colours: blue = inside a delegate, orange = portable kernels, grey = overhead / unattributed.
Every box has a tooltip (``<title>``) with its path and time; no script is needed.

Example::

    from etlens.views.icicle import icicle_tree, icicle_svg
    tree = icicle_tree(inspector.attribution())
    open("icicle.svg", "w").write(icicle_svg(tree))
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IcicleNode", "icicle_tree", "icicle_svg", "icicle_html"]

_COLOURS = {"delegate": ("#4c78a8", "#dbe6f3"), "kernel": ("#f58518", "#fde3c8"),
            "overhead": ("#9e9e9e", "#ececec"), "module": ("#54a24b", "#e0f0dc")}


@dataclass
class IcicleNode:
    """A box: ``name`` (label), ``path`` (module path or node), ``value`` (ms, own + children)."""

    name: str
    path: str = ""
    own: float = 0.0
    kind: str = "module"            # module | delegate | kernel | overhead
    detail: str = ""
    children: dict[str, "IcicleNode"] = field(default_factory=dict)

    @property
    def value(self) -> float:
        return self.own + sum(c.value for c in self.children.values())

    def child(self, name: str, path: str, kind: str = "module") -> "IcicleNode":
        c = self.children.get(name)
        if c is None:
            c = self.children[name] = IcicleNode(name, path, kind=kind)
        return c

    def depth(self) -> int:
        return 1 + max((c.depth() for c in self.children.values()), default=0)


def icicle_tree(attribution: Any, root_name: str = "Method::execute") -> IcicleNode:
    """The module tree of an :class:`~etlens.analysis.attribution.Attribution` (average ms per run)."""
    s = attribution.summary()
    root = IcicleNode(root_name, "", kind="module")
    for r in attribution.rows:
        avg = r.stats()["avg"]
        if not avg == avg or avg <= 0:   # NaN or nothing
            continue
        kind = "delegate" if r.inside_delegate else "kernel"
        if not r.debug_handles or not r.in_module:
            leaf = root.child("unattributed", "<unattributed>", "overhead")
            leaf.own += avg
            leaf.detail = "delegate-internal or operator time no node explains"
            continue
        node = root
        parts = r.module_path.split(".") if r.module_path else []
        for k in range(len(parts)):
            node = node.child(parts[k], ".".join(parts[:k + 1]))
        label = (r.op or r.node).replace("aten.", "").replace(".default", "")
        leaf = node.child(r.node, r.node, kind)
        leaf.name = label
        leaf.own += avg
        leaf.detail = (f"{r.node} ({r.op})" + (f" · {r.source_line}" if r.source_line else "")
                       + (f" · {', '.join(r.backend_ops[:3])}" if r.backend_ops else ""))
    for key, label, detail in (("framework_ms", "framework", "Method::execute outside every operator and delegate"),
                               ("delegate_overhead_ms", "delegate overhead",
                                "inside DELEGATE_CALL but outside its operator events")):
        v = s.get(key) or 0.0
        if v > 0:
            leaf = root.child(label, f"<{label}>", "overhead")
            leaf.own, leaf.detail = v, detail
    return root


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def icicle_svg(root: IcicleNode, width: int = 960, row: int = 26, min_label_px: int = 34) -> str:
    """The icicle as an ``<svg>`` element (self-contained; boxes carry ``data-path`` and ``data-ms``)."""
    total = root.value or 1.0
    depth = root.depth()
    height = depth * row + 4
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='etlens-icicle' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='system-ui, sans-serif' font-size='11'>"]

    def draw(node: IcicleNode, x: float, level: int, span: float) -> None:
        w = span * node.value / total
        if w < 0.5:
            return
        fill, light = _COLOURS.get(node.kind, _COLOURS["module"])
        colour = fill if (node.kind != "module" or level == 0) else light
        text_colour = "#fff" if colour == fill and node.kind != "module" else "#222"
        ms = node.value
        tip = f"{node.path or node.name}: {ms:.4f} ms ({100 * ms / total:.1f}%)" + (
            f"\n{node.detail}" if node.detail else "")
        y = level * row + 2
        out.append(f"<g class='ic-box' data-path='{_e(node.path)}' data-ms='{ms:.6f}' data-kind='{node.kind}'>"
                   f"<title>{_e(tip)}</title><rect x='{x:.2f}' y='{y}' width='{max(w - 1, 0.5):.2f}' "
                   f"height='{row - 2}' rx='2' fill='{colour}' stroke='#fff'/>")
        if w >= min_label_px:
            chars = int((w - 6) / 6.2)
            label = f"{node.name} {ms:.3f}ms" if level == 0 else node.name
            if len(label) > chars:
                label = label[:max(chars - 1, 1)] + "…"
            out.append(f"<text x='{x + 4:.2f}' y='{y + row / 2 + 2:.1f}' fill='{text_colour}' "
                       f"pointer-events='none'>{_e(label)}</text>")
        out.append("</g>")
        cx = x
        for c in sorted(node.children.values(), key=lambda c: -c.value):
            draw(c, cx, level + 1, span)
            cx += span * c.value / total

    draw(root, 0.0, 0, float(width))
    out.append("</svg>")
    return "".join(out)


def icicle_html(root: IcicleNode, width: int = 960) -> str:
    """The SVG plus a legend (an HTML fragment for the report)."""
    legend = " ".join(
        f"<span style='display:inline-block;width:10px;height:10px;background:{c[0]};margin:0 3px 0 10px'></span>"
        f"{_e(label)}" for label, c in (("inside a delegate", _COLOURS["delegate"]),
                                        ("portable kernel", _COLOURS["kernel"]),
                                        ("module", _COLOURS["module"]),
                                        ("framework / overhead / unattributed", _COLOURS["overhead"])))
    return (f"<div class='etlens-icicle-wrap' style='overflow-x:auto'>{icicle_svg(root, width)}</div>"
            f"<p class='muted' style='font-size:12px'>{legend}</p>")

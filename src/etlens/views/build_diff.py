"""A build diff for people: the terminal text, the CSV/TSV rows and the page with both graphs.

Takes a :class:`etlens.analysis.build_diff.BuildDiff` (never opens the build's files):

* :func:`build_diff_text` — the headline, the ratios, the causes ranked by share, the changed ops
  first, and what could not be aligned;
* :func:`build_diff_rows` — one row per aligned source op (:data:`ROW_COLUMNS`), for CSV/TSV;
* :func:`build_diff_page` / :func:`write_build_diff_html` — A's and B's lowered graphs side by side in
  the viewer (selecting a node highlights its counterpart); every node of a changed source op carries
  its change of time per run (B - A, ms) as the overlay, so changed ops stand out in colour, and the
  title carries the headline.

Example::

    from etlens.analysis.build_diff import diff_builds
    from etlens.views.build_diff import build_diff_text, write_build_diff_html
    d = diff_builds("builds/a", "builds/b")
    print(build_diff_text(d))
    write_build_diff_html(d, "diff.html")
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ROW_COLUMNS", "build_diff_rows", "build_diff_text", "build_diff_page", "write_build_diff_html",
           "changed_overlays"]

ROW_COLUMNS = ("module_path", "op", "kind", "how", "placement_a", "placement_b", "ms_a", "ms_b", "delta_ms",
               "const_bytes_a", "const_bytes_b", "arena_bytes_a", "arena_bytes_b", "ops_a", "ops_b")


def _side(s: Any, key: str) -> Any:
    if s is None:
        return None
    j = s.side_json()
    if key == "time_ms":
        return j["time_ms"]
    if key in ("constants", "arena"):
        return j["bytes"][key]
    if key == "ops":
        return " ".join(j["ops"])
    return j[key]


def build_diff_rows(d: Any) -> list[list[Any]]:
    """One list per aligned row, in :data:`ROW_COLUMNS` order (changed rows and B's program order kept)."""
    out = []
    for r in d.rows:
        j = d.row_json(r)
        out.append([j["module_path"], j["op"], j["kind"], j["how"], _side(r.a, "placement"), _side(r.b, "placement"),
                    _side(r.a, "time_ms"), _side(r.b, "time_ms"), j["time_delta_ms"], _side(r.a, "constants"),
                    _side(r.b, "constants"), _side(r.a, "arena"), _side(r.b, "arena"), _side(r.a, "ops"),
                    _side(r.b, "ops")])
    return out


def _x(v: float | None) -> str:
    return f"x{v:.3f}" if v is not None else "n/a"


def build_diff_text(d: Any, *, limit: int = 30) -> str:
    """The table format of ``etlens diff DIR_A DIR_B``."""
    from tabulate import tabulate

    s = d.summary
    lines = [f"A {d.a.files.pte} ({s['size_bytes']['a']:,} B, {s['runs']['a']} runs) vs "
             f"B {d.b.files.pte} ({s['size_bytes']['b']:,} B, {s['runs']['b']} runs)", "", d.headline, "",
             f"verdict {s['verdict']}: time {_x(s['time_ratio'])} (per-run mean of Method::execute; median "
             f"{_x(s['time_ratio_median'])}, noise floor x{s['noise_floor']:.2f}), file {_x(s['size_ratio'])}, "
             f"arena {_x(s['arena_ratio'])} ({s['arena_bytes']['a']:,} -> {s['arena_bytes']['b']:,} B)"]
    gap = s.get("output_gap")
    if gap:
        lines.append(f"numeric gap B vs A at the last logged output: SNR {gap['snr_db']:.1f} dB, max abs "
                     f"{gap['max_abs']:.3g}, relative {gap['rel']:.3g} ({len(d.gaps)} ops compared from the debug "
                     "buffers)")
    if d.causes:
        lines += ["", "causes (ranked by share of the change):",
                  tabulate([[f"{c.share:.0%}", c.kind, c.module_path or "(program)", c.explanation[:140]]
                            for c in d.causes], headers=["share", "kind", "module", "explanation"],
                           tablefmt="simple")]
    else:
        lines += ["", "causes: none above the noise floor"]
    rows = build_diff_rows(d)
    changed = [r for r in rows if r[2] != "same"]
    same = [r for r in rows if r[2] == "same"]
    shown = (changed + sorted(same, key=lambda r: -abs(r[8] or 0)))[:limit]

    def ms(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}"

    lines += ["", f"source ops ({len(rows)} aligned rows, {len(changed)} changed; changed first):",
              tabulate([[r[0] or "(top)", r[1], r[2], r[3], r[4] or "-", r[5] or "-", ms(r[6]), ms(r[7]),
                         f"{r[8]:+.4f}"] for r in shown],
                       headers=["module", "op", "change", "aligned by", "A on", "B on", "A ms", "B ms", "delta"],
                       tablefmt="simple")]
    if len(rows) > len(shown):
        lines.append(f"... {len(rows) - len(shown)} more rows (--format json/csv has them all)")
    un = d.unaligned
    if un:
        lines += ["", f"not aligned ({len(un)}): " + "; ".join(
            f"{'A' if r.b is None else 'B'} only: {r.module_path or '(top)'} {r.op}" for r in un[:20])]
    for n in d.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines) + "\n"


def changed_overlays(d: Any) -> tuple[dict[str, float], dict[str, float]]:
    """``(A's, B's)`` node name (as the viewer names it) -> the share (%) of the cause its source op
    belongs to, for every node of a changed source op."""
    oa: dict[str, float] = {}
    ob: dict[str, float] = {}
    for c in d.causes:
        for r in c.rows:
            for s, out in ((r.a, oa), (r.b, ob)):
                if s is not None:
                    for n in s.view_names or s.nodes:
                        out[n] = max(out.get(n, 0.0), round(100 * c.share, 1))
    return oa, ob


def build_diff_page(d: Any) -> str:
    """The page (a string): both lowered graphs side by side, changed source ops coloured by their time change."""
    from .html.api import compare_page

    oa, ob = changed_overlays(d)
    title = f"build diff: {d.headline}"
    return compare_page([(f"A: {d.a.label}", d.a.graph), (f"B: {d.b.label}", d.b.graph)], title=title,
                        overlays=[oa, ob], overlay_label="changed op: share of the change (%)")


def write_build_diff_html(d: Any, path: str | os.PathLike[str]) -> str:
    """Write :func:`build_diff_page` to ``path``; returns the path."""
    from .html.render import write_html

    return write_html(build_diff_page(d), path)

"""Views of an ``llm-diff`` result: the text summary and the offline report page.

The page (one file, no script, no request; the shared shell of :mod:`.page`) has:

* the summary cards llama.cpp users know (KLD mean / median / p90 / p99 / max, same top token,
  perplexities and their ratio), the first top-1 mismatch under teacher forcing, where free-running
  greedy decoding parts (``--generate``), and the first divergent layer;
* the phases of each build side by side (load, first token, decode tokens/s, prefill);
* a per-token KL chart (one bar per position, red where the top-1 tokens differ);
* the layer x position heatmap of relative error (log colour scale; the first divergent module
  marked), from the per-module comparison;
* the KV caches by position: relative error of the K and V rows each layer wrote, layer x position;
* with ``--generate``, both builds' free-running greedy continuations, the first differing token marked;
* the token table.

Takes the result object (:class:`etlens.analysis.llm_diff.compare.LlmDiffResult`), opens no file
except the one it writes.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from .page import esc, page

__all__ = ["render_text", "render_html", "write_html"]


def _f(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.{digits}g}"
    return str(v)


def render_text(res: Any) -> str:
    """The ``--format table`` output: summary, phases, layers, then the worst positions."""
    s = res.summary
    b, n = res.builds["base"]["path"], res.builds["new"]["path"]
    lines = [f"llm-diff: {b}  vs  {n}  ({s['positions']} positions)",
             "",
             f"  KLD mean {_f(s['kld_mean'])}  median {_f(s['kld_median'])}  p90 {_f(s['kld_p90'])}  "
             f"p99 {_f(s['kld_p99'])}  max {_f(s['kld_max'])}",
             f"  same top token {_f(s['same_top_pct'], 5)} %   top-k overlap {_f(s['topk_overlap_mean'])}",
             f"  perplexity base {_f(s['ppl_base'])}  new {_f(s['ppl_new'])}  ratio {_f(s['ppl_ratio'])}",
             f"  first top-1 mismatch (teacher forced) at position {_f(s['first_top1_mismatch'])}",
             f"  first divergent layer: {s.get('first_divergent_layer') or 'none'}"]
    if res.layer_note:
        lines.append(f"  ({res.layer_note})")
    g = getattr(res, "generation", None)
    if g:
        k = g["first_divergence"]
        where = ("identical" if k is None else
                 f"part at generated token {k} (sequence position {g['first_divergence_position']})")
        lines += [f"  free-running greedy, {g['steps']} tokens each: {where}",
                  f"    base: {' '.join(map(str, g['base']))}", f"    new:  {' '.join(map(str, g['new']))}"]
    kv = getattr(res, "kv", None)
    if kv is not None:
        first = kv.first_nonzero
        lines += ["", "  KV cache rows (K after RoPE, V), mean rel. error per layer   first above float rounding: "
                  + (f"layer {first['layer']} {first['cache'].upper()} at position {first['position']}" if first
                     else "none")]
        for li, layer in enumerate(kv.layers):
            lines.append(f"  layers.{layer:<21} K {_f(kv.k_mean[li]):>10}   V {_f(kv.v_mean[li]):>10}")
    t = res.layers
    if t is not None:
        lines += ["", "  module                       mean rel. error   (noise floor "
                  f"{_f(t.noise_floor)}, ratio {_f(t.ratio)})"]
        for m in t.modules:
            mark = "  <- first divergent" if m == t.first_divergent else ""
            lines.append(f"  {m:<28} {_f(t.mean[m]):>12}{mark}")
    lines += ["", "  phases          " + "".join(f"{k:>18}" for k in res.builds)]
    for key, label in (("load_ms", "load ms"), ("first_token_ms", "first token ms"),
                       ("decode_tokens_per_s", "decode tok/s"), ("prefill_ms", "prefill ms")):
        vals = [(b.get("phases") or {}).get(key) for b in res.builds.values()]
        lines.append(f"  {label:<16}" + "".join(f"{_f(v):>18}" for v in vals))
    worst = sorted(res.positions, key=lambda r: -r["kld"])[:10]
    lines += ["", "  worst positions:  pos  token  KLD        top-1 base/new"]
    for r in worst:
        lines.append(f"  {r['position']:>20}  {r['token']:>5}  {_f(r['kld']):<10} {r['top1_base']}/{r['top1_new']}"
                     f"{'' if r['top1_same'] else '  differs'}")
    return "\n".join(lines) + "\n"


def _kl_chart(rows: list[dict]) -> str:
    n = len(rows)
    w, h, pad = 900, 180, 30
    top = max((r["kld"] for r in rows), default=0.0) or 1.0
    bw = (w - 2 * pad) / max(n, 1)
    bars = []
    for r in rows:
        x = pad + r["position"] * bw
        bh = (h - 2 * pad) * (r["kld"] / top)
        cls = "d" if not r["top1_same"] else "s"
        bars.append(f"<rect class='{cls}' x='{x:.1f}' y='{h - pad - bh:.1f}' width='{max(bw - 1, 1):.1f}' "
                    f"height='{bh:.1f}'><title>position {r['position']} token {r['token']}: KLD {_f(r['kld'])}"
                    f"{'' if r['top1_same'] else ' (top-1 differs)'}</title></rect>")
    axis = (f"<line x1='{pad}' y1='{h - pad}' x2='{w - pad}' y2='{h - pad}' class='ax'/>"
            f"<text x='{pad}' y='{pad - 8}' class='lb'>max {_f(top)} nats</text>"
            f"<text x='{w - pad}' y='{h - 8}' class='lb' text-anchor='end'>position</text>")
    return (f"<svg viewBox='0 0 {w} {h}' class='chart' role='img' aria-label='KL divergence per position'>{axis}"
            f"{''.join(bars)}</svg>")


def _color(e: float, lo: float, hi: float) -> str:
    if e is None or not math.isfinite(e):
        return "#7f1d1d"
    if e <= 0:
        return "#f1f5f9"
    t = (math.log10(max(e, lo)) - math.log10(lo)) / max(math.log10(hi) - math.log10(lo), 1e-9)
    t = min(max(t, 0.0), 1.0)
    r, g, b = int(241 - t * (241 - 185)), int(245 - t * (245 - 28)), int(249 - t * (249 - 28))
    return f"rgb({r},{g},{b})"


def _heatmap(t: Any, label: str = "relative error per module and position") -> str:
    mods, errs = t.modules, t.errors
    n = errs.shape[1] if errs.size else 0
    cw, ch, left, top = max(6.0, min(14.0, 760 / max(n, 1))), 14, 190, 20
    w, h = left + cw * n + 10, top + ch * len(mods) + 24
    finite = [float(v) for v in errs.flat if math.isfinite(v) and v > 0]
    hi = max(finite) if finite else 1.0
    lo = max(min(finite) if finite else 1e-7, hi * 1e-6)
    cells = []
    for i, m in enumerate(mods):
        y = top + i * ch
        cls = " fd" if m == t.first_divergent else ""
        cells.append(f"<text x='{left - 6}' y='{y + ch - 3}' text-anchor='end' class='ml{cls}'>{esc(m)}</text>")
        for p in range(n):
            e = float(errs[i, p])
            cells.append(f"<rect x='{left + p * cw:.1f}' y='{y}' width='{cw:.1f}' height='{ch - 1}' "
                         f"fill='{_color(e, lo, hi)}'><title>{esc(m)} position {p}: {_f(e)}</title></rect>")
        if m == t.first_divergent:
            cells.append(f"<rect x='{left - 1}' y='{y - 1}' width='{cw * n + 2:.1f}' height='{ch + 1}' "
                         "class='mark'/>")
    cells.append(f"<text x='{left}' y='{h - 6}' class='lb'>position 0 .. {n - 1}; colour: relative error, "
                 f"log scale {_f(lo, 2)} .. {_f(hi, 2)}</text>")
    return (f"<svg viewBox='0 0 {w:.0f} {h:.0f}' class='heat' role='img' aria-label='{esc(label)}'>"
            f"{''.join(cells)}</svg>")


def _kv_section(kv: Any) -> str:
    """The K and V rows of every layer's cache, layer x position, on the heatmap's colour scale."""
    import numpy as np

    names, rows = [], []
    for li, layer in enumerate(kv.layers):
        names += [f"layers.{layer} K", f"layers.{layer} V"]
        rows += [kv.k[li], kv.v[li]]
    first = kv.first_nonzero
    mark = f"layers.{first['layer']} {first['cache'].upper()}" if first else None
    t = SimpleNamespace(modules=names, errors=np.vstack(rows), first_divergent=mark)
    where = (f"first above float rounding: <b>{esc(mark)}</b> at position {first['position']}" if first
             else "no cached row differs above float rounding")
    return ("<section class='kv'><h2>KV caches by position</h2><p class='note'>Relative error of the key rows "
            "(after RoPE) and value rows each layer wrote into its cache for every position (the inputs of "
            f"<code>llama::update_cache</code>, logged as their producers' outputs); {where}.</p>"
            f"{_heatmap(t, 'relative error of the cached K and V rows per layer and position')}</section>")


def _generation_section(g: dict) -> str:
    """Both builds' greedy continuations, token by token; the first differing token marked."""
    first = g["first_divergence"]
    cells = []
    for name in ("base", "new"):
        toks = "".join(f"<td class='{'gd' if first is not None and i >= first else ''}'>{t}</td>"
                       for i, t in enumerate(g[name]))
        cells.append(f"<tr><th class='l'>{name}</th>{toks}</tr>")
    head = "".join(f"<th>{g['prompt_tokens'] + i}</th>" for i in range(max(len(g["base"]), len(g["new"]))))
    where = ("the two builds generate the same tokens" if first is None else
             f"they part at generated token {first} (sequence position {g['first_divergence_position']})")
    return (f"<section class='gen'><h2>Free-running greedy decoding</h2><p class='note'>Each build decodes "
            f"{g['steps']} tokens after the prompt on its own (its own top-1 fed back); {esc(where)}.</p>"
            f"<div class='scroll'><table><tr><th class='l'>position</th>{head}</tr>{''.join(cells)}</table></div>"
            "</section>")


_CSS = (''
        'body{font:14px system-ui,sans-serif;color:var(--fg);background:var(--bg);margin:20px;max-width:1100px}'
        '.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}'
        '.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:8px 12px;min-width:120px}'
        '.card b{display:block;font-size:18px}.card span{color:var(--muted);font-size:12px}'
        '.card.bad b{color:var(--bad)}.card.ok b{color:var(--ok)}'
        'section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px;margin:12px 0}'
        'h2{font-size:16px;margin:4px 0 8px}table{border-collapse:collapse;font-size:12px}'
        'td,th{padding:2px 8px;border-bottom:1px solid var(--line);text-align:right}'
        'th{color:var(--muted);font-weight:600}td.l,th.l{text-align:left}tr.diff td{background:#fef2f2}'
        '.chart,.heat{width:100%;height:auto}.chart rect.s{fill:#60a5fa}.chart rect.d{fill:var(--bad)}'
        '.ax{stroke:var(--muted)}.lb{font-size:11px;fill:var(--muted)}.ml{font-size:11px;fill:var(--fg)}'
        '.ml.fd{fill:var(--bad);font-weight:700}.mark{fill:none;stroke:var(--bad);stroke-width:1.5}'
        '.note{color:var(--muted)}.scroll{max-height:420px;overflow:auto}'
        '.gen td{text-align:center;font-family:monospace}.gen td.gd{background:#fef2f2;color:var(--bad)}')


def _card(label: str, value: str, cls: str = "") -> str:
    return f"<div class='card {cls}'><b>{esc(value)}</b><span>{esc(label)}</span></div>"


def render_html(res: Any) -> str:
    """The report page as one string (see the module docstring)."""
    s = res.summary
    same = s["top1_agreement"]
    fd = s.get("first_divergent_layer")
    cards = "".join([
        _card("KLD mean (nats)", _f(s["kld_mean"])), _card("KLD median", _f(s["kld_median"])),
        _card("KLD p90", _f(s["kld_p90"])), _card("KLD p99", _f(s["kld_p99"])), _card("KLD max", _f(s["kld_max"])),
        _card("same top token", f"{_f(s['same_top_pct'], 4)} %", "ok" if same == 1 else "bad" if same < 0.9 else ""),
        _card("perplexity base / new", f"{_f(s['ppl_base'])} / {_f(s['ppl_new'])}"),
        _card("perplexity ratio", _f(s["ppl_ratio"])),
        _card("first top-1 mismatch (teacher forced)", _f(s["first_top1_mismatch"])),
        *([_card("free-running greedy parts at", _f(res.generation["first_divergence_position"]) if
                 res.generation["first_divergence"] is not None else "never",
                 "ok" if res.generation["first_divergence"] is None else "bad")] if res.generation else []),
        _card("first divergent layer", fd or "none", "bad" if fd else "ok")])
    b, n = res.builds["base"], res.builds["new"]
    head = (f"<p>base <code>{esc(b['path'])}</code> vs new <code>{esc(n['path'])}</code>: {s['positions']} positions, "
            "both fed the same tokens (teacher forcing); KL(base || new) of the next-token distributions.</p>")
    ph_rows = ""
    for key, label in (("load_ms", "load (ms)"), ("first_token_ms", "first token (ms)"),
                       ("decode_tokens_per_s", "decode tokens/s"), ("prefill_ms", "prefill of the prompt (ms)"),
                       ("source", "timed by")):
        ph_rows += f"<tr><td class='l'>{esc(label)}</td>" + "".join(
            f"<td>{esc(_f((x.get('phases') or {}).get(key)))}</td>" for x in (b, n)) + "</tr>"
    phases = (f"<section><h2>Phases</h2><table><tr><th class='l'></th><th>base</th><th>new</th></tr>{ph_rows}</table>"
              "</section>")
    chart = f"<section><h2>KL divergence per position</h2>{_kl_chart(res.positions)}</section>"
    if res.layers is not None:
        t = res.layers
        heat = (f"<section><h2>Relative error, module x position</h2><p class='note'>noise floor "
                f"{_f(t.noise_floor)}; a layer departs when the error it adds exceeds {_f(t.ratio)}x the other "
                f"layers'. First divergent: <b>{esc(t.first_divergent or 'none')}</b>; first above float rounding: "
                f"{esc(t.first_nonzero or 'none')}.</p>{_heatmap(t)}</section>")
    else:
        heat = f"<section><h2>Layers</h2><p class='note'>{esc(res.layer_note or 'not compared')}</p></section>"
    if res.kv is not None:
        heat += _kv_section(res.kv)
    if res.generation:
        heat += _generation_section(res.generation)
    trs = []
    for r in res.positions:
        trs.append(f"<tr class='{'' if r['top1_same'] else 'diff'}'><td>{r['position']}</td><td>{r['token']}</td>"
                   f"<td>{_f(r['next_token'])}</td><td>{_f(r['kld'])}</td><td>{r['top1_base']}</td>"
                   f"<td>{r['top1_new']}</td><td>{_f(r['topk_overlap'], 3)}</td><td>{_f(r['logp_base'])}</td>"
                   f"<td>{_f(r['logp_new'])}</td></tr>")
    table = ("<section><h2>Tokens</h2><div class='scroll'><table><tr><th>pos</th><th>token</th><th>next</th>"
             "<th>KLD</th><th>top-1 base</th><th>top-1 new</th><th>top-k overlap</th><th>log p(next) base</th>"
             f"<th>log p(next) new</th></tr>{''.join(trs)}</table></div></section>")
    return page("etlens llm-diff", head + f"<div class='cards'>{cards}</div>" + chart + heat + phases + table,
                css=_CSS, heading="h1")


def write_html(res: Any, path: str) -> None:
    """Write :func:`render_html` to ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(res))

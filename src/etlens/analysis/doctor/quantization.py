"""Rules ``quant-culprit`` and ``quant-no-gain``: int8 that costs accuracy at one op, or buys nothing.

``quant-culprit`` (a quantized build): the quantized clusters ranked by the error each one
*introduces* on its own (:func:`etlens.analysis.numerics.introduced.introduced_errors`, on the
build's own float and int8 modules, in PyTorch); when the top one alone costs the output at least
:data:`CULPRIT_NSR` (SNR <= 30 dB), keeping it in float is simulated with the recipe's own quantizer
(no lowering) and the output SNR it recovers is the estimated win in dB. The fix is the recipe
(``etlens fix`` / ``report --recipe``); ``--verify`` lowers it and measures the SNR on the runtime.

``quant-no-gain`` (a quantized program with a time profile): quantized ops that run outside every
delegate between float ops pay a quantize and a dequantize each time and run int8 kernels no faster
than float ones. Estimated win: the time of those quantize/dequantize nodes.
"""

from __future__ import annotations

import math
from typing import Any

from ._common import DB_BUDGET, share, uniq, where
from .finding import Finding, severity_for

__all__ = ["RULE_CULPRIT", "RULE_NO_GAIN", "check", "CULPRIT_NSR", "simulate_keep_float"]

RULE_CULPRIT = "quant-culprit"
RULE_NO_GAIN = "quant-no-gain"

#: the top culprit is a finding when its own error alone costs the output this NSR (SNR <= 30 dB)
CULPRIT_NSR = 1e-3

#: most quantized clusters ranked (each one re-runs the float model)
MAX_CLUSTERS = 400


def _db(nsr: float) -> float:
    return math.inf if nsr <= 0 else -10.0 * math.log10(nsr)


def simulate_keep_float(session: Any, keep: list[str]) -> float:
    """Output SNR (dB vs float) of ``session``'s model quantized with ``keep`` in float, in PyTorch."""
    import torch

    from ...builder.quantize import quantize_pt2e
    from ...builder.recipe import recipe_quantizer
    from ..fix.search import output_error

    q = quantize_pt2e(session.model, session.inputs, session.config, calibration=session.calibration,
                      exported=session.exported, quantizer=recipe_quantizer(session.config, keep,
                                                                            exported=session.exported))
    with torch.no_grad():
        return output_error(q(*session.inputs), session.float_module()(*session.inputs))[0]


def _best_keep(ctx: Any, s: Any, culprit: str) -> tuple[list[str], float | None]:
    """The culprit alone in float, and with the consumers that would quantize its output again (an
    activation culprit: ``etlens fix``'s candidates), simulated; the smaller set unless the larger
    one gains more than 1 dB. ``(keep, simulated SNR)``; SNR ``None`` when the quantizer refused."""
    keep, best = [culprit], None
    try:
        best = simulate_keep_float(s, keep)
        from ...builder.recipe import recipe_quantizer
        from ..fix.consumers import annotated_module, find_consumers

        gm = annotated_module(s.exported, recipe_quantizer(s.config, keep, exported=s.exported))
        consumers = [c for c in find_consumers(gm, keep, s.model) if c not in keep]
        if consumers:
            wider = simulate_keep_float(s, keep + consumers)
            if wider > best + 1.0:
                keep, best = keep + consumers, wider
    except Exception as exc:  # noqa: BLE001 - the quantizer refused: the estimate from the ranking
        ctx.notes[RULE_CULPRIT] = f"simulating keep-float {keep}: {type(exc).__name__}: {str(exc)[:160]}"
    return keep, best


def _culprit(ctx: Any) -> list[Finding]:
    s = ctx.session
    if s is None or not getattr(s, "quantize", False):
        return []
    import torch

    from ..fix.search import output_error
    from ..numerics.introduced import cluster_count, introduced_errors

    quant = s.quantized_module
    if cluster_count(quant) > MAX_CLUSTERS:
        ctx.notes[RULE_CULPRIT] = f"more than {MAX_CLUSTERS} quantized clusters: run etlens fix for the culprits"
        return []
    float_gm = s.float_module()
    rows = [r for r in introduced_errors(float_gm, quant, s.inputs) if math.isfinite(r.introduced)]
    named = [r for r in rows if r.module_path]
    if not named:
        return []
    top = max(named, key=lambda r: r.introduced)
    with torch.no_grad():
        before = output_error(quant(*s.inputs), float_gm(*s.inputs))[0]
    if top.introduced < CULPRIT_NSR or not math.isfinite(before):
        return []
    total = sum(r.introduced for r in rows)
    keep, after = _best_keep(ctx, s, top.module_path)
    if after is None:
        after = _db(max(total - top.introduced, 1e-12))
    after = min(after, 120.0)
    win = max(after - before, 0.0)
    score = min(share(win, DB_BUDGET), 1.0)
    recipe = ", ".join(repr(k) for k in keep)
    kept = f"{where(top.module_path)}" + (f" (and {', '.join(keep[1:])}, which would quantize its output again)"
                                          if len(keep) > 1 else "")
    return [Finding(
        rule=RULE_CULPRIT, severity=severity_for(score),
        title=f"int8 error comes from one op: {where(top.module_path)} ({top.op}) introduces "
              f"{share(top.introduced, total):.0%} of it",
        module_paths=keep, nodes=list(top.nodes),
        evidence={"module_type": top.module_type, "op": top.op, "introduced_nsr": top.introduced,
                  "introduced_share": share(top.introduced, total), "accumulated_nsr": top.accumulated,
                  "int8_snr_db": before, "simulated_snr_db_keep_float": after,
                  "ranking": [{"module": r.module_path, "introduced_nsr": r.introduced} for r in
                              sorted(named, key=lambda r: -r.introduced)[:5]]},
        estimated_win={"db": win}, score=score,
        fix=f"keep {kept} in float: a recipe with keep_float = [{recipe}] (etlens fix "
            f"{ctx.model_args} --recipe-out recipe.json writes it; report --quantize --recipe recipe.json applies "
            "it; in a script: the quantizer's set_filter_function leaving that module out)",
        action={"kind": "keep_float", "modules": keep},
        verify_command=ctx.command("fix", "--format json"))]


def _no_gain(ctx: Any) -> list[Finding]:
    qdq = [c for c in ctx.costs if not c.inside_delegate and ("quantize_per" in c.op or "dequantize_per" in c.op)]
    if len(qdq) < 2:
        return []
    ms = sum(c.ms for c in qdq)
    total = ctx.latency_ms
    score = share(ms, total)
    modules = uniq(c.module_path for c in qdq)
    return [Finding(
        rule=RULE_NO_GAIN, severity=severity_for(score),
        title=f"{len(qdq)} quantize/dequantize nodes run outside the delegates ({ms:.3g} ms/run)",
        module_paths=modules, nodes=[c.node for c in qdq],
        evidence={"qdq_nodes": len(qdq), "qdq_ms": ms, "latency_ms": total},
        estimated_win={"ms": ms}, score=score,
        fix=f"the int8 ops at {', '.join(where(m) for m in modules[:3])} convert to and from float around portable "
            "kernels: quantize them where the delegate runs them in int8, or keep them in float (a keep-float "
            "recipe) so no conversion is needed",
        action={"kind": "keep_float", "modules": modules},
        verify_command=ctx.command("doctor", "--format json"))]


def check(ctx: Any) -> list[Finding]:
    return _culprit(ctx) + _no_gain(ctx)

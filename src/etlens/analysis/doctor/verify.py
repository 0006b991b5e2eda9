"""``etlens doctor --verify``: apply the fixes a build can apply, measure, and say what each got.

A finding's ``action`` says what its fix is as data. Those a build can make without touching the
user's code are applied to a variant of the build (:meth:`~etlens.builder.session.BuildSession.variant`:
same export, same warm child), lowered, run and measured in the finding's own unit:

* ``keep_float`` (``quant-culprit``): the recipe's quantizer, then the output SNR against the float
  model on the runtime (dB); ``quant-no-gain``: the same build's latency (ms);

Code changes (an op or argument the partitioner refuses, a layout change in ``forward``, an export
bound) cannot be applied here: their ``verified`` holds the measured ``before`` and ``after: null``
with ``applied: false``, and the verify command to run once the code is changed.
"""

from __future__ import annotations

import os
from typing import Any

from ...errors import EtlensError
from .finding import Finding, win_unit

__all__ = ["verify_findings", "MAX_VERIFIED"]

#: the most findings applied and measured (each is one lowering and a few runs)
MAX_VERIFIED = 3


def _latency_ms(etdump: str, pte: str) -> float | None:
    from ...readers.artifacts import ArtifactSet
    from ..inspector import Inspector
    from ..inspector.methods import main_method, method_timings

    from statistics import median

    arts = ArtifactSet(etdump=etdump, pte=pte)
    main = main_method(method_timings(Inspector(etdump_data=arts.etdump(), pte=arts.pte())))
    if main is None:
        return None
    runs = [x for x in main.run_times if x == x]
    return float(median(runs)) if runs else float(main.latency)


def _runtime_snr(session: Any, pte: str) -> float:
    import torch

    from ..fix.search import output_error

    outs = session.run(pte, session.inputs)
    with torch.no_grad():
        ref = session.float_module()(*session.inputs)
    return output_error(outs if len(outs) != 1 else outs[0], ref)[0]


def _build(variant: Any, out_dir: str, runs: int) -> Any:
    with variant:
        arts = variant.lower(out_dir)
        variant.run(arts.pte, variant.inputs, runs=runs, etdump=arts.etdump)
    return arts


def _keep_float(f: Finding, session: Any, base_pte: str, base_latency: float | None, work: str,
                runs: int) -> dict[str, Any]:
    from ...builder.recipe import apply_recipe

    modules = list(f.action.get("modules") or [])
    arts = _build(apply_recipe(session, modules, name=f"{session.name}_keep_float"),
                  os.path.join(work, f"verify_{f.rule}"), runs)
    if win_unit(f.estimated_win) == "db":
        before, after = _runtime_snr(session, base_pte), _runtime_snr(session, arts.pte)
        return {"unit": "db", "before": before, "after": after, "applied": True, "gained": after - before,
                "change": f"keep_float {modules}"}
    after_ms = _latency_ms(arts.etdump, arts.pte)
    gained = None if base_latency is None or after_ms is None else base_latency - after_ms
    return {"unit": "ms", "before": base_latency, "after": after_ms, "applied": True, "gained": gained,
            "change": f"keep_float {modules}"}


def verify_findings(findings: list[Finding], session: Any, base: Any, work: str, *, runs: int = 5,
                    latency_ms: float | None = None, limit: int = MAX_VERIFIED) -> None:
    """Fill ``verified`` of every finding in place; the first ``limit`` ones above ``info`` are applied
    when a build can apply them (the others say why not).

    ``base``: the build's :class:`~etlens.builder.session.DeviceArtifacts`; ``work``: where variants go.
    """
    done = 0
    for f in findings:
        if f.severity == "info" or done >= limit:
            why = "info: nothing to fix" if f.severity == "info" else f"only the first {limit} findings are built"
            f.verified = {"unit": win_unit(f.estimated_win), "before": _before(f, latency_ms), "after": None,
                          "applied": False, "note": f"not verified ({why})"}
            continue
        done += 1
        unit = win_unit(f.estimated_win)
        kind = f.action.get("kind")
        try:
            if kind == "keep_float" and session is not None and getattr(session, "quantize", False):
                f.verified = _keep_float(f, session, base.pte, latency_ms, work, runs)
                continue
        except EtlensError as exc:
            f.verified = {"unit": unit, "before": _before(f, latency_ms), "after": None, "applied": False,
                          "note": f"the fix could not be built: {str(exc).splitlines()[0][:300]}"}
            continue
        f.verified = {"unit": unit, "before": _before(f, latency_ms), "after": None, "applied": False,
                      "note": "a change to the model's code or export: make it, then run the verify command",
                      "verify_command": f.verify_command}


def _before(f: Finding, latency_ms: float | None) -> Any:
    unit = win_unit(f.estimated_win)
    ev = f.evidence
    if unit == "ms":
        return latency_ms
    if unit == "db":
        return ev.get("int8_snr_db")
    return ev.get("arena_bytes") or ev.get("size") or ev.get("program_bytes") or ev.get("planned_bytes")

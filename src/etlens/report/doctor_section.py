"""The report's first section, "Findings": what to change, what it should buy, and how to check it.

:mod:`etlens.analysis.doctor` run on the report's own analyses (the Inspector, the attribution, the
delegation info the page already shows: nothing is computed twice) and on its files. The table
lists every finding above ``info`` sorted by estimated win — rule, modules, estimated win, the fix
and the etlens command that verifies it — and a card in the summary strip counts them. The report
runs the rules that read what is there; the build-time ones (the partitioner's replayed reasons,
the int8 culprit simulation, the ETDump overhead measured with and without tracing) are
``etlens doctor --model …``'s. An error in the rules is a note, never a broken report.
"""

from __future__ import annotations

from typing import Any

from .render import Card, Section, table_html

__all__ = ["findings", "section", "card"]

#: rules that need a build or run the program again: left to ``etlens doctor``
_SKIP = ("profiling", "quantization")


def findings(data: Any, notes: list[str]) -> Any:
    """The :class:`~etlens.analysis.doctor.DoctorResult` of the report's data (``None`` when the rules failed;
    the failure is added to ``notes``, the page's)."""
    from ..analysis.doctor import DoctorContext, diagnose

    inputs = data.inputs
    try:
        ctx = DoctorContext(etdump=inputs.etdump, etrecord=inputs.etrecord, pte=inputs.pte,
                            debug_buffer=inputs.debug_buffer, artifacts=data.artifacts)
        ctx.provide(inspector=data.inspector, attribution=data.attribution, delegation=data.delegation)
        return diagnose(ctx, skip=_SKIP)
    except Exception as exc:  # noqa: BLE001 - an optional section never takes the report down
        notes.append(f"findings: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
        return None


def _win(win: dict) -> str:
    unit, value = next(iter(win.items()), ("", None))
    if value is None:
        return ""
    return f"{value:,.0f} bytes" if unit == "bytes" else f"{value:.3g} {unit}"


def section(res: Any) -> Section | None:
    """The "Findings" section of :func:`findings`' result (first on the page); ``None`` without one."""
    if res is None:
        return None
    shown = [f for f in res.findings if f.severity != "info"]
    if not shown:
        body = "<p>No finding above <em>info</em>: nothing to fix that the run shows.</p>"
    else:
        rows = [(i + 1, f.severity, f.rule, ", ".join(f.module_paths) or "(root)", _win(f.estimated_win), f.title,
                 f.fix, f.verify_command) for i, f in enumerate(shown)]
        tones = {i: "bad" if f.severity == "high" else "warn" for i, f in enumerate(shown)
                 if f.severity in ("high", "medium")}
        body = table_html(rows, ["#", "severity", "rule", "module", "estimated win", "finding", "fix", "verify with"],
                          table_id="findings", numeric=(0,), highlight=tones)
    info = len(res.findings) - len(shown)
    if info:
        body += f"<p class='muted'>{info} informational finding(s) in <code>etlens doctor</code>.</p>"
    return Section("findings", "Findings", body,
                   "What to change, sorted by estimated win (ms per run, bytes or dB): each with the fix and the "
                   "command that verifies it. 'etlens doctor --model … --verify' applies and measures the fixes a "
                   f"build can apply; JSON: 'etlens doctor --format json'. {len(shown)} finding(s).")


def card(res: Any) -> Card | None:
    """``findings: N`` in the summary strip (worst severity as the tone)."""
    if res is None:
        return None
    shown = [f for f in res.findings if f.severity != "info"]
    worst = res.worst() if shown else None
    tone = {"high": "bad", "medium": "warn"}.get(worst or "", "ok")
    top = shown[0] if shown else None
    detail = f"top: {top.rule} ({_win(top.estimated_win)})" if top else "nothing to fix"
    return Card("findings", str(len(shown)), detail, tone)

"""What a doctor rule reports: :class:`Finding` (one problem, its evidence, win, fix and check).

A finding answers an action, not a fact: *what to change, what it should buy, and how to check it*.

* ``rule`` — a stable id (``portable-op``, ``fragmented-delegate`` …; :data:`etlens.analysis.doctor.RULES`);
* ``severity`` — ``info`` < ``low`` < ``medium`` < ``high``, from the win's share of what it is a share of
  (:func:`severity_for`);
* ``module_paths`` / ``nodes`` — where, as the model's own ``nn.Module`` paths and the graph's node names;
* ``evidence`` — the numbers the rule read (times, counts, bytes, the partitioner's reason);
* ``estimated_win`` — one of ``{"ms": …}`` (per run), ``{"bytes": …}``, ``{"db": …}`` (output SNR);
* ``score`` — the win as a share of its budget (ms of the run's latency, bytes of the planned memory and
  program, dB of a 40 dB target), the one scale findings are sorted on;
* ``fix`` — what to change, in words a person can act on; ``action`` — the same as data an agent or
  ``--verify`` can apply (``{"kind": "keep_float", "modules": [...]}``, ``{"kind": "code", ...}``);
* ``verify_command`` — the etlens command that shows whether the fix worked;
* ``verified`` — with ``--verify``: ``{"before": …, "after": …}`` in the win's unit, measured.

Example::

    f = Finding(rule="portable-op", severity="high", title="aten.avg_pool2d runs on portable kernels",
                module_paths=["pool"], estimated_win={"ms": 0.8}, score=0.4, fix="…", verify_command="…")
    f.to_json()["estimated_win"]   # {'ms': 0.8}
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Finding", "SEVERITIES", "severity_rank", "severity_for", "win_unit", "win_value"]

#: severities, lowest first (``--fail-on SEVERITY`` trips on this one and every higher one)
SEVERITIES = ("info", "low", "medium", "high")

#: score (share of the budget) at and above which a finding is that severity
_THRESHOLDS = (("high", 0.15), ("medium", 0.05), ("low", 0.01))


def severity_rank(severity: str) -> int:
    """``info`` 0 … ``high`` 3 (an unknown name is 0)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else 0


def severity_for(score: float) -> str:
    """The severity of a finding whose win is ``score`` of its budget (0.2 of the latency: ``high``)."""
    for name, floor in _THRESHOLDS:
        if score >= floor:
            return name
    return "info"


def win_unit(win: dict[str, Any]) -> str:
    """``ms``, ``bytes`` or ``db``: the one key of an ``estimated_win``."""
    return next(iter(win), "ms")


def win_value(win: dict[str, Any]) -> float:
    """The number of an ``estimated_win`` (0.0 when empty)."""
    v = next(iter(win.values()), 0.0)
    return float(v) if v is not None else 0.0


def _clean(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6) if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


@dataclass
class Finding:
    """One problem a rule found, with the fix and the command that checks it (see the module docstring)."""

    rule: str
    severity: str
    title: str
    module_paths: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    estimated_win: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    fix: str = ""
    action: dict[str, Any] = field(default_factory=dict)
    verify_command: str = ""
    verified: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"rule": self.rule, "severity": self.severity, "title": self.title,
               "module_paths": list(self.module_paths), "nodes": list(self.nodes),
               "evidence": _clean(self.evidence), "estimated_win": _clean(self.estimated_win),
               "score": _clean(float(self.score)), "fix": self.fix, "action": _clean(self.action),
               "verify_command": self.verify_command}
        if self.verified is not None:
            out["verified"] = _clean(self.verified)
        return out

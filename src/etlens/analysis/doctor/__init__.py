"""``etlens doctor``: from what a compiled model did to what to change, with the win and the check.

Rules read what ``report`` knows (timings per node and module, delegation and the partitioner's
reasons, planned memory, the int8 error each op introduces) and each returns
:class:`~.finding.Finding` objects: a stable rule id, a severity, the evidence, the estimated win
(ms per run, bytes or dB), the fix in concrete terms and the etlens command that verifies it.

* :mod:`.context` — :class:`DoctorContext`: the run's artifacts (and the build, when there is one),
  analysed lazily, once;
* one module per rule: :mod:`.portable`, :mod:`.partitions`, :mod:`.layout`, :mod:`.quantization`,
  :mod:`.dynamic_shapes`, :mod:`.constants`, :mod:`.fragmentation`, :mod:`.llm`, :mod:`.profiling`;
* :mod:`.runner` — :func:`diagnose` runs them and sorts the findings by estimated win;
* :mod:`.verify` — :func:`verify_findings` applies the fixes a build can apply (keep-in-float
  recipes, the float build) and measures before and after.

The JSON document is described by ``etlens/schema/doctor.schema.json`` (:func:`schema`).

Example::

    from etlens.analysis.doctor import DoctorContext, diagnose
    ctx = DoctorContext(etdump="run.etdp", etrecord="model.etrecord", pte="model.pte")
    res = diagnose(ctx)
    res.findings[0].rule, res.findings[0].estimated_win, res.findings[0].fix
"""

from __future__ import annotations

from typing import Any

from .context import DoctorContext, NodeCost
from .finding import SEVERITIES, Finding, severity_for, severity_rank
from .runner import RULE_IDS, RULES, SCHEMA_VERSION, DoctorResult, diagnose, sort_findings

__all__ = ["DoctorContext", "NodeCost", "Finding", "SEVERITIES", "severity_for", "severity_rank", "RULES",
           "RULE_IDS", "SCHEMA_VERSION", "DoctorResult", "diagnose", "sort_findings", "schema"]


def schema() -> dict[str, Any]:
    """The published JSON Schema of ``etlens doctor --format json`` (``etlens/schema/doctor.schema.json``)."""
    import json
    from importlib import resources

    return json.loads(resources.files("etlens.schema").joinpath("doctor.schema.json").read_text(encoding="utf-8"))

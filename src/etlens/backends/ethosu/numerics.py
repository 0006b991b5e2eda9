"""Ethos-U numerics (the ``numerics`` hook, analysis floor): the values inside the delegate.

An Ethos-U build cannot run here (no FVP), so ``etlens gap --inside-delegates`` compares what it can:
each partition's TOSA graph run on the TOSA reference model against the pt2e and float references
(:mod:`.tosa_values`). The core calls :func:`inside_values` on a build that does not run, and
:func:`gate_message` for the first flagged row.
"""

from __future__ import annotations

import tempfile
from typing import Any

from .tosa_values import TosaInsideResult, tosa_inside_values

__all__ = ["inside_values", "gate_message"]


def inside_values(session: Any, metric: str | None = None, threshold: float | None = None) -> TosaInsideResult:
    """Lower ``session`` (a :class:`etlens.builder.BuildSession`) and compare each partition's values.

    ``metric="SNR"`` with a ``threshold`` (``gap --metric SNR --threshold 15``) flags a row whose SNR
    against float is below it (default 10 dB); rows are also flagged more than 2 int8 steps from pt2e.
    """
    floor = float(threshold) if threshold is not None and (metric or "").upper() == "SNR" else 10.0
    with tempfile.TemporaryDirectory(prefix="etlens-ethosu-") as tmp:
        arts = session.lower(tmp)
        return tosa_inside_values(arts.etrecord, inputs=tuple(session.inputs), float_program=session.exported,
                                  snr_floor_db=floor)


def gate_message(first: Any) -> str:
    """Why the gate fails, for the first flagged row."""
    return (f"{first.node} inside the Ethos-U subgraph is {first.max_abs_lsb} int8 steps from the "
            f"pt2e reference (TOSA {first.tosa_tensor})")

"""The facade: ExecuTorch-compatible classes and functions that combine analyses with views.

This is the one module at the top layer that may import every other layer (analysis, views,
readers): ``etlens.Inspector`` and the viewer's file-opening compatibility functions live here, so
the layers below stay one-way (analysis never imports views, views never open files).

Each section below belongs to one compatible API; keep them delimited.
"""

from __future__ import annotations

import sys
from typing import IO

from .analysis.inspector import Event, EventBlock, PerfData, RuntimeOutput, TimeScale
from .analysis.inspector import Inspector as _AnalysisInspector

__all__ = ["Inspector", "Event", "EventBlock", "PerfData", "TimeScale", "RuntimeOutput"]


# =====================================================================================================
# Inspector (drop-in for executorch.devtools.Inspector): the analysis class + the methods that
# render views (tables, TensorBoard, Perfetto). ``etlens.Inspector`` is this class.
# =====================================================================================================
class Inspector(_AnalysisInspector):
    """``etlens.Inspector``: :class:`etlens.analysis.inspector.Inspector` plus its compatible views.

    Everything about events, tables and numerics is inherited (see the base class for the
    arguments); this class adds the methods that print or write files: :meth:`print_data_tabular`,
    :meth:`write_tensorboard_artifact`, :meth:`write_perfetto_trace` and :meth:`summary_text`.
    """

    def print_data_tabular(self, file: IO[str] = sys.stdout, include_units: bool = True,
                           include_delegate_debug_data: bool = False) -> None:
        """Print the events as a table (``OPERATOR_CALL`` rows and bulky columns left out)."""
        from .views.tables import display_or_print_df

        display_or_print_df(self.printed_dataframe(include_units, include_delegate_debug_data), file)

    def write_tensorboard_artifact(self, path: str) -> None:
        """Write per-operator latency as a TensorBoard event file under directory ``path``."""
        from .views.tensorboard import write_tensorboard

        write_tensorboard(self, path)

    def write_perfetto_trace(self, path: str) -> None:
        """Write a Chrome trace-event JSON timeline (open it in https://ui.perfetto.dev)."""
        from .views.perfetto import write_perfetto

        write_perfetto(self, path)

    def summary_text(self, top: int = 5) -> str:
        """One paragraph: total time per block, top operators, delegated share of time."""
        from .views.tables import summary_paragraph

        return summary_paragraph(self, top)

# ===================================================================================== end Inspector

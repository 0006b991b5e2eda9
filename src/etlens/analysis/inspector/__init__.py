"""``etlens.analysis.inspector``: the ExecuTorch-compatible ``Inspector`` over columnar events (public surface).

* :mod:`.core` — the :class:`Inspector` class (timings, tables, numerics entry points);
* :mod:`.build` — ETDump runs → :class:`~etlens.model.events.BlockColumns`;
* :mod:`.etrecord` — debug handles, op types and stack traces from the ETRecord;
* :mod:`.events` — the compatible ``Event`` / ``EventBlock`` objects, built lazily;
* :mod:`.frame` — the ``to_dataframe`` columns.

The methods that write views (``print_data_tabular``, ``write_tensorboard_artifact``,
``write_perfetto_trace``, ``summary_text``) are added by the facade, :class:`etlens.compat.Inspector`
(what ``etlens.Inspector`` is): analysis never imports views.
"""

from ...model.events import PerfData, TimeScale
from .core import Inspector
from .events import Event, EventBlock, RuntimeOutput

__all__ = ["Inspector", "Event", "EventBlock", "PerfData", "TimeScale", "RuntimeOutput"]

"""Per-operator latency as a TensorBoard event file (what ExecuTorch's stub promises).

Scalars written under directory ``path`` (one event file):

* ``<block>/op_total_<unit>/<op type>`` — per run (step = run index), the total time of that
  operator type in the block (delegate calls as ``DELEGATE_CALL (<backend>)``);
* ``<block>/event_avg_<unit>`` — step = event index, each event's average (a latency profile
  along the program);
* ``<block>/run_total_<unit>`` — ``Method::execute`` per run when present;

plus a text summary (``summary``). Needs ``tensorboard`` (``pip install tensorboard``); the file is
written with torch's ``SummaryWriter`` when torch is available, else with tensorboard's own writer.

Example::

    inspector.write_tensorboard_artifact("runs/profile")   # tensorboard --logdir runs
"""

from __future__ import annotations

import os
import re

import numpy as np

from ..errors import MissingDataError
from .tables import op_key
from ..schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES, METHOD_EXECUTE, OPERATOR_CALL

__all__ = ["write_tensorboard"]

_FRAMEWORK = FRAMEWORK_EVENT_NAMES


def _tag(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/()]+", "_", s).strip("_") or "event"


class _Writer:
    """``add_scalar`` / ``add_text`` / ``close`` over whichever TensorBoard writer is installed."""

    def __init__(self, logdir: str):
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._w = SummaryWriter(log_dir=logdir)
            self._raw = None
            return
        except ImportError:
            pass
        try:
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.compat.proto.summary_pb2 import Summary
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError as exc:
            raise MissingDataError("write_tensorboard_artifact needs the 'tensorboard' package "
                                   "(pip install 'etlens[tensorboard]')") from exc
        self._w = None
        self._raw = (EventFileWriter(logdir), Event, Summary)

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        if self._w is not None:
            self._w.add_scalar(tag, float(value), step)
            return
        writer, Event, Summary = self._raw
        import time

        writer.add_event(Event(wall_time=time.time(), step=step,
                               summary=Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])))

    def add_text(self, tag: str, text: str) -> None:
        if self._w is not None:
            self._w.add_text(tag, text)

    def close(self) -> None:
        if self._w is not None:
            self._w.close()
        else:
            self._raw[0].close()


def write_tensorboard(inspector, path: str) -> str:
    """Write the latency scalars of ``inspector`` under directory ``path``; returns ``path``."""
    try:
        import tensorboard  # noqa: F401
    except ImportError as exc:
        raise MissingDataError("write_tensorboard_artifact needs the 'tensorboard' package "
                               "(pip install 'etlens[tensorboard]')") from exc
    os.makedirs(path, exist_ok=True)
    unit = inspector.target_time_scale.value
    w = _Writer(path)
    try:
        for b in inspector.block_columns:
            stats = b.stats()
            block = _tag(b.name)
            totals: dict[str, np.ndarray] = {}
            for i, name in enumerate(b.names):
                if not b.has_perf[i]:
                    continue
                w.add_scalar(f"{block}/event_avg_{unit}", stats[i, 3], i)
                if name == METHOD_EXECUTE:
                    for j, v in enumerate(b.raw[i].tolist()):
                        w.add_scalar(f"{block}/run_total_{unit}", v, j)
                if name == OPERATOR_CALL or name in _FRAMEWORK or b.is_delegated[i]:
                    continue
                if name == DELEGATE_CALL:
                    key = f"DELEGATE_CALL ({b.backend_names[i] or 'delegate'})"
                else:
                    key = op_key(name, b.op_types[i])
                totals[key] = totals.get(key, 0) + b.raw[i]
            for key, per_run in totals.items():
                for j, v in enumerate(np.atleast_1d(per_run).tolist()):
                    w.add_scalar(f"{block}/op_total_{unit}/{_tag(key)}", v, j)
        w.add_text("summary", inspector.summary_text())
    finally:
        w.close()
    return path

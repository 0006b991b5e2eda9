"""Ask the partitioner why a node was not delegated.

ExecuTorch's configuration-based partitioners (XNNPACK and others built on
``ConfigerationBasedPartitioner``) keep one support config per operator in
``partitioner.target_partitioner_configs`` (keyed by the op name without its namespace, such as
``linear.default``). A config's ``check_constraints(node, program)`` decides whether a node may be
delegated, and when it says no it usually records why through ExecuTorch's ``WhyNoPartition``
class, which logs an object carrying ``.node`` and ``.reason`` at DEBUG level.

:func:`explain` replays that decision for each non-delegated node: no config for the op → "no
support config"; a failing check → the logged reason (or "check_constraints returned False");
a passing check → the node was supported on its own but left out when partitions were formed.
Nothing here imports ExecuTorch: it only calls the partitioner object it is given.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

__all__ = ["explain"]


def _format_target_name(name: str) -> str:
    # the partitioner keys its configs by the op name without the dialect namespace
    parts = name.split(".")
    return ".".join(parts[1:]) if len(parts) > 2 else name


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[Any] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg
        if hasattr(msg, "reason") and hasattr(msg, "node"):
            self.records.append((msg.node, str(msg.reason)))


def _partitioners(partitioner: Any) -> list[Any]:
    return list(partitioner) if isinstance(partitioner, (list, tuple)) else [partitioner]


def explain(exported_program: Any, partitioner: Any, names: Iterable[str]) -> dict[str, str]:
    """``{node name: reason}`` for the named top-level nodes of ``exported_program``."""
    wanted = set(names)
    fx_nodes = {n.name: n for n in exported_program.graph_module.graph.nodes if n.name in wanted}
    parts = _partitioners(partitioner)
    capture = _Capture()
    root = logging.getLogger()
    # WhyNoPartition logs at DEBUG: lower every ExecuTorch logger for the duration of the checks
    saved = {}
    for lname, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and lname.startswith("executorch"):
            saved[lname] = logger.level
            logger.setLevel(logging.DEBUG)
    saved_root = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    # keep other handlers quiet while we lower the level
    quiet = [(h, h.level) for h in root.handlers if h is not capture]
    for h, _ in quiet:
        h.setLevel(max(h.level, logging.WARNING))
    out: dict[str, str] = {}
    try:
        for name in names:
            node = fx_nodes.get(name)
            if node is None:
                continue
            out[name] = _reason(node, exported_program, parts, capture)
    finally:
        root.removeHandler(capture)
        root.setLevel(saved_root)
        for h, level in quiet:
            h.setLevel(level)
        for lname, level in saved.items():
            logging.getLogger(lname).setLevel(level)
    return out


def _reason(node: Any, ep: Any, parts: list[Any], capture: _Capture) -> str:
    from ...readers import target_name
    from .facts import STRUCTURAL

    tname = target_name(node.target)
    base = tname.split(".")[0] if tname else ""
    if base in STRUCTURAL or tname in STRUCTURAL:
        return STRUCTURAL.get(base) or STRUCTURAL[tname]
    key = _format_target_name(tname)
    said: list[str] = []
    for p in parts:
        pname = type(p).__name__
        configs = getattr(p, "target_partitioner_configs", None)
        if not isinstance(configs, dict):
            said.append(f"{pname} cannot be asked (it has no per-operator support configs)")
            continue
        config = configs.get(key)
        if config is None:
            said.append(f"{pname} has no support config for {key}")
            continue
        capture.records.clear()
        try:
            ok = bool(config.check_constraints(node, ep))
        except Exception as exc:  # a check that crashes on this node is itself the reason
            said.append(f"{pname} {type(config).__name__}.check_constraints raised "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
            continue
        if ok:
            said.append(f"{pname} supports {key} on its own ({type(config).__name__} accepts it), but the node "
                        "was left out when partitions were formed")
            continue
        mine = [r for n, r in capture.records if n is node] or [r for _, r in capture.records]
        if mine:
            said.append(f"{pname} rejected it: {mine[0]}")
        else:
            said.append(f"{pname} rejected it ({type(config).__name__}.check_constraints returned False)")
    return "; ".join(said)

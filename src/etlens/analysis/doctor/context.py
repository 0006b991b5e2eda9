"""What the doctor's rules read: :class:`DoctorContext`, one lazy view of a run's artifacts.

Every analysis a rule needs is computed once, on first use, from the same parsed files
(:class:`etlens.readers.artifacts.ArtifactSet`): the Inspector (timings), the attribution (time per
ATen node and module, inside delegates too), the delegation info (what each backend took; with a
build, the partitioner's reason for what it left out), the planned memory (arenas, lifetimes). A
rule that finds its input missing returns nothing, so the doctor works on whatever there is.

A context made from a build (:meth:`DoctorContext.from_session`) also holds the
:class:`~etlens.builder.session.BuildSession` (its float and quantized modules, its partitioner,
variants for ``--verify``) and the command-line spelling of the model (``--model F:build
--backend NAME [--quantize]``) the findings' verify commands repeat.
"""

from __future__ import annotations

import math
from statistics import median
from dataclasses import dataclass, field
from typing import Any

from ...errors import EtlensError

__all__ = ["DoctorContext", "NodeCost"]


@dataclass
class NodeCost:
    """One ATen node's measured time per run and where it comes from in the user's model."""

    node: str
    op: str
    ms: float
    module_path: str
    module_type: str
    source_line: str
    inside_delegate: bool
    backend: str
    handles: tuple[int, ...]
    backend_ops: list[str] = field(default_factory=list)
    match: str = ""


class DoctorContext:
    """Lazy analyses of one run (see the module docstring).

    Args:
        etdump, etrecord, pte, debug_buffer: the run's files (ETDump required for the time rules).
        session: the :class:`~etlens.builder.session.BuildSession` that built them (optional).
        model_args: the command line naming the model, e.g. ``--model m.py:build --backend xnnpack``
            (default: the artifacts' own flags).
        artifacts: an :class:`~etlens.readers.artifacts.ArtifactSet` already holding the parsed files
            (its paths are used instead of the ones above).
    """

    def __init__(self, *, etdump: str | None = None, etrecord: str | None = None, pte: str | None = None,
                 debug_buffer: str | None = None, session: Any = None, model_args: str = "",
                 artifacts: Any = None) -> None:
        from ...readers.artifacts import ArtifactSet

        if artifacts is not None:  # files parsed already (the report's): never parsed twice
            etdump, etrecord = artifacts.etdump_path, artifacts.etrecord_path
            pte, debug_buffer = artifacts.pte_path, artifacts.debug_buffer_path
        self.paths = {"etdump": etdump, "etrecord": etrecord, "pte": pte, "debug_buffer": debug_buffer}
        self.artifacts = artifacts or ArtifactSet(etdump=etdump, etrecord=etrecord, pte=pte, debug_buffer=debug_buffer)
        self.session = session
        if not model_args:
            model_args = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.paths.items() if v)
        self.model_args = model_args
        #: why an analysis could not run: ``{analysis: one line}`` (shown as the result's notes)
        self.notes: dict[str, str] = {}
        self._cache: dict[str, Any] = {}

    @classmethod
    def from_session(cls, session: Any, arts: Any, model_args: str) -> DoctorContext:
        """The context of a build: ``arts`` is what ``session.build`` wrote."""
        return cls(etdump=arts.etdump, etrecord=arts.etrecord, pte=arts.pte, debug_buffer=arts.debug_buffer,
                   session=session, model_args=model_args)

    def provide(self, **analyses: Any) -> DoctorContext:
        """Hand over analyses already computed (``inspector=``, ``attribution=``, ``delegation=``,
        ``memory=``): the report passes its own, so nothing is computed twice. Returns ``self``."""
        self._cache.update({k: v for k, v in analyses.items() if v is not None})
        return self

    # -- lazy analyses ---------------------------------------------------------------------------
    def _get(self, key: str, fn: Any) -> Any:
        if key not in self._cache:
            try:
                self._cache[key] = fn()
            except EtlensError as exc:
                self.notes[key] = str(exc).splitlines()[0][:300]
                self._cache[key] = None
        return self._cache[key]

    @property
    def program(self) -> Any:
        """The parsed ``.pte`` (``None`` without one)."""
        return self._get("pte", lambda: self.artifacts.pte() if self.paths["pte"] else None)

    @property
    def etrecord(self) -> Any:
        return self._get("etrecord", lambda: self.artifacts.etrecord() if self.paths["etrecord"] else None)

    @property
    def inspector(self) -> Any:
        def make() -> Any:
            if not self.paths["etdump"]:
                return None
            from ..inspector import Inspector

            return Inspector(etdump_data=self.artifacts.etdump(), etrecord=self.etrecord, pte=self.program,
                             debug_buffer_path=self.paths["debug_buffer"])
        return self._get("inspector", make)

    @property
    def timing(self) -> Any:
        """The main method's :class:`~etlens.analysis.inspector.methods.MethodTiming` (``None`` without a dump)."""
        def make() -> Any:
            if self.inspector is None:
                return None
            from ..inspector.methods import main_method, method_timings

            return main_method(method_timings(self.inspector))
        return self._get("timing", make)

    @property
    def latency_ms(self) -> float | None:
        """Latency of one run of the main method (ms): the median run (one slow run on a busy machine does
        not move it), else the average."""
        t = self.timing
        if t is None:
            return None
        runs = [x for x in t.run_times if x == x]
        if runs:
            return float(median(runs))
        return float(t.latency) if t.latency == t.latency else None

    @property
    def attribution(self) -> Any:
        def make() -> Any:
            if self.inspector is None or self.program is None:
                return None
            from ..attribution import attribute

            return attribute(self.inspector, self.program)
        return self._get("attribution", make)

    @property
    def costs(self) -> list[NodeCost]:
        """Every timed ATen node of the run, slowest first (empty without a dump and a ``.pte``)."""
        def make() -> list[NodeCost]:
            att = self.attribution
            if att is None:
                return []
            out = []
            for r in att.rows:
                times = [t for t in r.times() if math.isfinite(t)]
                if not r.node or not times:
                    continue
                out.append(NodeCost(node=r.node, op=r.op, ms=float(median(times)), module_path=r.module_path,
                                    module_type=r.module_type, source_line=r.source_line,
                                    inside_delegate=r.inside_delegate, backend=r.backend,
                                    handles=tuple(r.debug_handles), backend_ops=list(r.backend_ops), match=r.match))
            out.sort(key=lambda c: -c.ms)
            return out
        return self._get("costs", make) or []

    @property
    def delegation(self) -> Any:
        """:class:`~etlens.analysis.delegation.DelegationInfo` of the run, with the partitioner's reasons
        when the build's partitioner is at hand."""
        def make() -> Any:
            src = self.paths["etrecord"] or self.paths["pte"]
            if not src:
                return None
            from ..delegation import get_delegation_info

            record = self.etrecord
            pte = self.program if record is not None and self.paths["pte"] else None
            obj = record if record is not None else self.program
            part = self.partitioner
            if part is not None:
                try:
                    return get_delegation_info(obj, pte=pte, partitioner=part)
                except Exception as exc:  # noqa: BLE001 - reasons are extra: the info without them
                    self.notes["partitioner reasons"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            return get_delegation_info(obj, pte=pte)
        return self._get("delegation", make)

    @property
    def partitioner(self) -> Any:
        """The build's partitioners (``None`` without a build or when they cannot be made here)."""
        def make() -> Any:
            cfg = getattr(self.session, "config", None) or self._artifact_config()
            if cfg is None or getattr(cfg, "partitioner_factory", None) is None:
                return None
            try:
                return cfg.partitioners()
            except Exception as exc:  # noqa: BLE001 - no reasons, the rest works
                self.notes["partitioner"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                return None
        return self._get("partitioner", make)

    def _artifact_config(self) -> Any:
        """Without a build: the build config of the backend the program's delegates belong to (the registry's
        ``builds`` name), whose partitioner can replay its checks on the ETRecord's edge program."""
        if self.program is None or self.etrecord is None:
            return None
        from ...backends import for_delegate
        from ...builder.backends import get_backend

        for plan in self.program.program.execution_plan:
            for d in plan.delegates:
                b = for_delegate(d.id)
                if b is not None and b.builds:
                    try:
                        return get_backend(b.builds[0])
                    except Exception:  # noqa: BLE001 - no build config here: no reasons
                        return None
        return None

    @property
    def memory(self) -> Any:
        """:class:`~etlens.analysis.memory.MemoryReport` of the ``.pte`` (tensors named with an ETRecord)."""
        def make() -> Any:
            if self.program is None:
                return None
            from ..memory import analyze_memory, attach_etrecord

            rep = analyze_memory(self.program)
            if self.etrecord is not None:
                try:
                    attach_etrecord(rep, self.etrecord)
                except EtlensError as exc:
                    self.notes["memory names"] = str(exc)[:200]
            return rep
        return self._get("memory", make)

    @property
    def node_modules(self) -> dict[str, tuple[str, str, str]]:
        """``{node: (module path, module type, source line)}`` of the ETRecord's reference graph."""
        def make() -> dict[str, tuple[str, str, str]]:
            out: dict[str, tuple[str, str, str]] = {}
            for c in self.costs:
                out.setdefault(c.node, (c.module_path, c.module_type, c.source_line))
            return out
        return self._get("node_modules", make) or {}

    @property
    def timeline(self) -> list[dict[str, Any]]:
        """The main method's first run in execution order: ``{"kind": "delegate"|"op", "instruction",
        "handles", "name", "backend", "ms"}`` per top-level event (delegate-internal and framework events left out)."""
        def make() -> list[dict[str, Any]]:
            from ...schema import DELEGATE_CALL, FRAMEWORK_EVENT_NAMES

            t, att = self.timing, self.attribution
            if t is None or self.inspector is None or not t.blocks:
                return []
            bi = sorted(t.blocks)[0]
            b = self.inspector.block_columns[bi]
            backends: dict[int, str] = {}
            for ev in (att.events if att is not None else []):
                if ev.block == bi and ev.backend:
                    backends.setdefault(int(ev.instruction), ev.backend)
            skip = set(FRAMEWORK_EVENT_NAMES) - {DELEGATE_CALL}
            out = []
            for i, name in enumerate(b.names):
                if name in skip or b.is_delegated[i] or b.delegate_ids[i] is not None:
                    continue
                h = b.debug_handles[i]
                handles = () if h is None else ((h,) if isinstance(h, int) else tuple(h))
                instr = int(b.instruction_ids[i]) if i < len(b.instruction_ids) else -1
                row = b.raw[i]
                ms = float(median([x for x in row if x == x])) if any(x == x for x in row) else 0.0
                kind = "delegate" if name == DELEGATE_CALL else "op"
                out.append({"kind": kind, "instruction": instr, "handles": handles, "name": name,
                            "backend": backends.get(instr, "") if kind == "delegate" else "", "ms": ms})
            return out
        return self._get("timeline", make) or []

    def command(self, verb: str, extra: str = "") -> str:
        """``etlens VERB <the model or artifacts> EXTRA`` (a verify command)."""
        return " ".join(p for p in ("etlens", verb, self.model_args, extra) if p)

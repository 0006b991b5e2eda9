"""One build's artifacts, read once: the program, its lowered graph, its runs.

A *build* is what one lowering and its device runs leave in a directory: one ``.pte``, its
``.etrecord``, one or more ``.etdp`` (one per process that ran it) with optional debug buffers
(``<stem>.bin`` / ``<stem>.debug.bin`` beside each dump) and an optional pass trace
(``*.trace.json``). :func:`find_artifacts` names them; :func:`load_build` reads them with the
existing readers and analyses:

* the ``.pte`` (:func:`etlens.readers.pte.read`): kernels, delegates, the memory plan
  (:func:`etlens.analysis.memory.analyze_memory`) and the file size;
* the ETRecord's lowered view (:func:`etlens.readers.program.resolve_program` with the ``.pte``):
  every ATen node with its module path, debug handles and placement (top level or inside a delegate);
* each ETDump through the inspector's attribution (:meth:`etlens.analysis.inspector.Inspector.attribution`):
  time per ATen node per run, delegate-internal events included, and ``Method::execute`` per run.

Example::

    from etlens.analysis.build_diff.load import load_build
    b = load_build("builds/a")
    b.execute_ms          # Method::execute per run, every process's runs in order
    b.graph               # the lowered graph (delegates carry their inner graph)
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any

from ...errors import MissingDataError

__all__ = ["BuildFiles", "Build", "find_artifacts", "load_build"]


@dataclass
class BuildFiles:
    """The files of one build (paths; ``etdumps`` and ``debug_buffers`` pair by index, a buffer may be None)."""

    pte: str
    etrecord: str | None = None
    etdumps: list[str] = field(default_factory=list)
    debug_buffers: list[str | None] = field(default_factory=list)
    trace: str | None = None


@dataclass
class Build:
    """One build read: see the module docstring. ``attributions`` has one entry per ETDump."""

    files: BuildFiles
    label: str
    pte: Any
    graph: Any
    memory: Any
    size: int
    record: Any = None
    attributions: list[Any] = field(default_factory=list)
    inspectors: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    method: str = "forward"
    _origins: dict[str, str] | None = field(default=None, repr=False)
    #: why the partitioner left a node out, ``node name -> reason`` (``"*"``: every node), when known
    #: (``etlens diff --model`` asks the backend's partitioner; files alone carry no reasons)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def execute_ms(self) -> list[float]:
        """``Method::execute`` of every run (ms), the processes' runs one after another."""
        return [x for a in self.attributions for x in a.execute_per_run]

    @property
    def steady_execute_ms(self) -> list[float]:
        """:attr:`execute_ms` without each process's cold start: leading runs over twice the process's median
        (caches, weight packing, first-touch allocation; at most 2 a process, never below 3 runs left)."""
        import numpy as np

        out: list[float] = []
        for a in self.attributions:
            xs = list(a.execute_per_run)
            if len(xs) >= 5:
                med = float(np.median(xs))
                k = 0
                while k < 2 and len(xs) - k > 3 and xs[k] > 2 * med:
                    k += 1
                xs = xs[k:]
            out += xs
        return out

    @property
    def process_of_run(self) -> list[int]:
        """Which ETDump (process) each entry of :attr:`execute_ms` came from."""
        return [i for i, a in enumerate(self.attributions) for _ in a.execute_per_run]

    @property
    def arena_bytes(self) -> int:
        """Planned memory of the method (the sum of its arenas), bytes."""
        m = self._method_memory()
        return sum(a.size for a in m.arenas) if m is not None else 0

    @property
    def peak_live_bytes(self) -> int:
        """What the plan must hold at its busiest instruction, summed over arenas (bytes)."""
        m = self._method_memory()
        return sum(a.peak_live for a in m.arenas) if m is not None else 0

    def _method_memory(self) -> Any:
        for m in self.memory.methods:
            if m.name == self.method:
                return m
        return self.memory.methods[0] if self.memory.methods else None

    def pass_origins(self) -> dict[str, str]:
        """``node name -> the pass (trace snapshot) that added it``, from the build's pass trace (empty
        without one, or when it cannot be read)."""
        if self.files.trace is None:
            return {}
        if self._origins is None:
            from ...errors import EtlensError
            from ...model.trace import Trace

            self._origins = {}
            try:
                trace = Trace.load(self.files.trace)
            except (EtlensError, OSError, ValueError) as exc:
                self.notes.append(f"{self.files.trace}: pass trace not read ({exc})")
                return {}
            for snap in trace.snapshots[1:]:
                for name in snap.diff.get("added", []):
                    self._origins.setdefault(name, snap.name)
        return self._origins

    @property
    def instruction_handles(self) -> dict[int, list[int]]:
        """``instruction -> debug handles`` of the method (the ETRecord's ``debug_handle_map``)."""
        if self.record is None:
            return {}
        return dict(self.record.debug_handle_map.get(self.method, {}))


def _one(paths: list[str], what: str, where: str) -> str | None:
    if len(paths) > 1:
        raise MissingDataError(f"{where}: {len(paths)} {what} files ({', '.join(os.path.basename(p) for p in paths)}); "
                               f"a build directory holds one {what} (put each build in its own directory)")
    return paths[0] if paths else None


def _debug_buffer(etdp: str, alone: bool) -> str | None:
    """The debug buffer of ``etdp``: ``<stem>.debug.bin`` / ``<stem>.bin``, else the folder's one ``.bin`` when
    ``etdp`` is the folder's one dump (beside several dumps a lone buffer belongs to one of them, unknown which)."""
    stem = os.path.splitext(etdp)[0]
    for cand in (stem + ".debug.bin", stem + ".bin"):
        if os.path.exists(cand):
            return cand
    bins = glob.glob(os.path.join(os.path.dirname(etdp), "*.bin"))
    return bins[0] if alone and len(bins) == 1 else None


def find_artifacts(path: str) -> BuildFiles:
    """The build's files in directory ``path`` (or the directory of a ``.pte`` given directly)."""
    where = os.fspath(path)
    if os.path.isfile(where) and where.endswith(".pte"):
        pte, where = where, os.path.dirname(where) or "."
    elif os.path.isdir(where):
        pte = _one(sorted(glob.glob(os.path.join(where, "*.pte"))), ".pte", where)
    else:
        raise MissingDataError(f"{where}: not a build directory (a folder holding a .pte, its .etrecord and .etdp)")
    if pte is None:
        raise MissingDataError(f"{where}: no .pte file; a build directory holds the program (.pte), its .etrecord "
                               "and one or more .etdp")
    etrecord = _one(sorted(glob.glob(os.path.join(where, "*.etrecord"))), ".etrecord", where)
    dumps = sorted(glob.glob(os.path.join(where, "*.etdp")) + glob.glob(os.path.join(where, "*.etdump")))
    traces = sorted(glob.glob(os.path.join(where, "*.trace.json")))
    return BuildFiles(pte=pte, etrecord=etrecord, etdumps=dumps,
                      debug_buffers=[_debug_buffer(d, len(dumps) == 1) for d in dumps],
                      trace=traces[0] if traces else None)


def load_build(path: str | BuildFiles, *, label: str | None = None, method: str = "forward",
               with_debug: bool = True) -> Build:
    """Read one build (a directory, a ``.pte`` path or :class:`BuildFiles`); see the module docstring.

    ``with_debug=False`` leaves the debug buffers unread (no numeric gaps, faster on big programs).
    """
    import warnings

    from ...readers.program import resolve_program
    from ...readers.pte import read as read_pte
    from ...readers.registry import read
    from ..inspector import Inspector
    from ..memory import analyze_memory

    files = path if isinstance(path, BuildFiles) else find_artifacts(path)
    notes: list[str] = []
    pte = read_pte(files.pte)
    record = read(files.etrecord) if files.etrecord else None
    if record is not None:
        graph = resolve_program(record, method, "lowered", pte).graph
    else:
        graph = pte.graphs().get(method) or next(iter(pte.graphs().values()))
        notes.append(f"{os.path.dirname(files.pte) or '.'}: no .etrecord: ops are the program's kernels and "
                     "delegates (no module paths, nothing inside delegates to align)")
    attributions, inspectors = [], []
    for dump, buf in zip(files.etdumps, files.debug_buffers, strict=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ins = Inspector.from_files(dump, record, buf if with_debug else None, pte=pte, method=method)
        inspectors.append(ins)
        attributions.append(ins.attribution())
    if not files.etdumps:
        notes.append(f"{os.path.dirname(files.pte) or '.'}: no .etdp: no times for this build")
    return Build(files=files, label=label or os.path.basename(os.path.abspath(os.path.dirname(files.pte))),
                 pte=pte, graph=graph, memory=analyze_memory(pte), size=os.path.getsize(files.pte), record=record,
                 attributions=attributions, inspectors=inspectors, notes=notes, method=method)

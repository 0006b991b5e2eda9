"""``etlens collect``: ETDumps → rows of the fleet dataset (Parquet), streaming, in parallel.

Each ETDump is parsed by etlens' own reader and grouped into event blocks exactly as the
Inspector does; with an ETRecord every event is attributed to its debug handles, operators, graph
nodes and innermost module path. :func:`dump_rows` takes the fast path (:mod:`.fastpath`: only
the profile columns read, the Inspector's grouping run once per pattern of identical runs, a
program's static columns cached); :func:`reference_rows` builds a full
:class:`~etlens.analysis.inspector.Inspector` per file and is the reference the tests compare
with. Attribution is computed once per program and broadcast over the runs with numpy; with
several workers it is computed in the parent before they fork (:func:`_warm`).

Memory stays bounded: a worker holds one ETDump's table at a time and streams it into its own
staged part file (:class:`~.store.PartWriter`); the parent only receives counts, reasons and the
staged part, which it commits into the dataset (:class:`~.store.Committer`). A file that cannot be
read is skipped with a one-line reason, never aborting the collection.

Idempotent: every dump's identity (sha256 of its bytes, with the metadata) is recorded in the part
that holds its rows, and a dump the dataset already holds is not added again (``mode="skip"``, the
default; ``"replace"`` swaps its rows, ``"append"`` adds them again). A collect killed at any point
leaves a valid dataset, and running it again ends with exactly the rows of one clean collect; two
collects into one dataset at once neither lose nor double a run (:mod:`.store` says how).

Example::

    from etlens.fleet import collect
    res = collect(["dumps/"], "fleet.parquet", meta={"device": "pixel7", "build": "n"},
                  etrecord="model.etrecord", pte="model.pte")
    res.events, res.skipped          # rows written, [(path, reason), ...]
    res.runs_new, res.runs_present   # runs added, runs the dataset already held (left out)
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from ..errors import EtlensError, MissingDataError
from .attrs import attributions, block_key, inspector_blocks
from .columns import COLUMNS, META_COLUMNS, arrow_schema, occurrences
from .store import Committer, PartWriter, SourceInfo, StagedPart, Staging, content_id, fault, meta_key

__all__ = ["CollectResult", "collect", "find_etdumps", "dump_rows", "reference_rows", "model_id",
           "ETDUMP_SUFFIXES", "record_at", "one_line"]

#: file names a directory walk picks up (files given one by one are read whatever their name)
ETDUMP_SUFFIXES = (".etdp", ".etdump")


@dataclass
class CollectResult:
    """What one ``collect`` did: files read, rows written, files skipped (with why), part files, and
    by identity: runs added, runs the dataset already held (left out, or swapped with ``replace``)."""

    dataset: str
    files: int = 0
    events: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    seconds: float = 0.0
    mode: str = "skip"
    runs_new: int = 0
    runs_present: int = 0
    files_present: int = 0
    runs_replaced: int = 0

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    def message(self) -> str:
        """The one-line summary ``etlens collect`` prints."""
        line = (f"collected {self.events} events from {self.files} files into {self.dataset} in {self.seconds:.2f} s: "
                f"{self.runs_new} runs new, {self.runs_present} already present")
        if self.runs_present and self.mode == "skip":
            line += " (left out; --replace swaps them, --append-duplicates adds them again)"
        if self.runs_replaced:
            line += f", {self.runs_replaced} old runs replaced"
        if self.skipped:
            line += f"; {len(self.skipped)} skipped (reasons above)"
        return line

    def add_batch(self, out: BatchResult, committer: Committer) -> None:
        """Count one batch's result and commit its staged part."""
        self.files += out.files
        self.files_present += len(out.present)
        self.runs_present += sum(r for _, r in out.present)
        self.skipped += out.skipped
        if out.staged is not None:
            added, dup, replaced = committer.commit(out.staged)
            if added:
                self.parts.append(os.path.join(self.dataset, out.staged.name))
            self.events += sum(s.rows for s in added)
            self.runs_new += sum(s.runs for s in added)
            self.runs_present += sum(s.runs for s in dup)
            self.files_present += len(dup)
            self.runs_replaced += replaced


@dataclass
class BatchResult:
    """What a worker did with one batch of dumps: files read, the staged part, files skipped (with why),
    files already in the dataset (with their runs)."""

    files: int = 0
    staged: StagedPart | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)
    present: list[tuple[str, int]] = field(default_factory=list)


def find_etdumps(inputs: Iterable[str]) -> list[str]:
    """Files to read: each file as given, each directory walked (sorted) for ``*.etdp`` / ``*.etdump``."""
    out: list[str] = []
    for item in inputs:
        if os.path.isdir(item):
            for root, dirs, files in os.walk(item):
                dirs.sort()
                out += [os.path.join(root, f) for f in sorted(files) if f.endswith(ETDUMP_SUFFIXES)]
        else:
            out.append(item)
    return out


def model_id(pte: str | None) -> str | None:
    """The model's identity: the first 16 hex digits of the ``.pte``'s sha256 (None without a .pte)."""
    if not pte:
        return None
    h = hashlib.sha256()
    try:
        with open(pte, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        raise MissingDataError(f"{pte}: cannot read the .pte ({exc.strerror or exc}); pass the program that ran") \
            from exc
    return h.hexdigest()[:16]


def _dict_column(values: list, indices: np.ndarray):
    """A dictionary-encoded string column: ``values[indices]``, a None value becoming a null row."""
    import pyarrow as pa

    if None in values:
        nulls = values.index(None)
        values = list(values)
        values[nulls] = ""
        mask = indices == nulls
        if mask.any():
            return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32(), mask=mask),
                                                  pa.array(values, pa.string()))
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(values, pa.string()))


def dump_rows(path: str, record: Any = None, meta: dict[str, str | None] | None = None,
              extra_meta: list[str] | None = None, data: bytes | None = None, *, fast: bool = True,
              prompt_lens: list[int] | None = None):
    """The rows of one ETDump as a :class:`pyarrow.Table` (schema :func:`~.columns.arrow_schema`, then the
    LLM columns ``phase`` and ``session`` of :func:`~.phases.with_phases`, then ``peak_rss_bytes``:
    :func:`~.columns.with_measured`).

    ``record``: a parsed ETRecord (or None); ``data``: the file's bytes when already read (``path``
    then only names it, as Spark's ``binaryFiles`` gives them). Only events with timings are rows (debug-only events
    carry no duration). Raises :class:`~etlens.errors.EtlensError` for an unreadable dump.

    ``fast`` (default): the fleet fast path (:mod:`.fastpath`: profile columns straight from the
    FlatBuffer, structure and attribution cached per program); a dump whose ETRecord attribution
    does not match its blocks, and a file it cannot read, go through :func:`reference_rows`, the
    Inspector-based reference (which gives the same rows, or names what is wrong with the file).
    ``prompt_lens``: an LLM's prompt lengths for the ``phase`` column (:func:`~.phases.with_phases`).
    """
    from .columns import with_measured
    from .phases import with_phases

    if fast:
        from .fastpath import fast_rows

        try:
            table = fast_rows(path, record, meta, extra_meta, data)
        except (EtlensError, ValueError, IndexError, KeyError, OverflowError):
            table = None        # a corrupt file: the reference path names what is wrong
        if table is not None:
            return with_measured(with_phases(table, record, prompt_lens), path)
    return with_measured(with_phases(reference_rows(path, record, meta, extra_meta, data), record, prompt_lens), path)


def reference_rows(path: str, record: Any = None, meta: dict[str, str | None] | None = None,
                   extra_meta: list[str] | None = None, data: bytes | None = None):
    """:func:`dump_rows` through a full :class:`~etlens.analysis.inspector.Inspector` per file (the reference)."""
    import pyarrow as pa

    from ..analysis.inspector import Inspector

    meta = meta or {}
    extra_meta = extra_meta or []
    schema = arrow_schema(extra_meta)
    blocks = inspector_blocks(Inspector, path, data, None)
    has_record = record is not None
    attrs_of: list[list[tuple]] = []
    if has_record:
        attrs_of = attributions(record, [block_key(b) for b in blocks], path, data) or []
    tables = []
    for bi, b in enumerate(blocks):
        rows = np.flatnonzero(b.has_perf)
        k = len(b.runs)
        if not rows.size or not k:
            continue
        n = len(b.names)
        names = list(dict.fromkeys(b.names))
        name_idx = np.array([names.index(x) for x in b.names], np.int32)
        attrs = attrs_of[bi] if has_record else [(None, None, None, None, None)] * n
        dids = [None if d is None else str(d) for d in b.delegate_ids]
        backends = [a[4] for a in attrs]
        occ = occurrences(b.names, attrs)
        ev = np.tile(rows, k)                                   # run-major: run 0's events, run 1's …
        run_of = np.repeat(np.asarray(b.runs, np.int32), rows.size)
        col = np.repeat(np.arange(k), rows.size)
        m = len(ev)

        def per_event(values: list, ev: np.ndarray = ev):
            uniq = list(dict.fromkeys(values))
            pos = {v: j for j, v in enumerate(uniq)}
            idx = np.array([pos[v] for v in values], np.int32)[ev]
            return _dict_column(uniq, idx)

        def const(v: str | None, m: int = m):
            return _dict_column([v], np.zeros(m, np.int32))

        data: dict[str, Any] = {
            "file": const(path), "run": pa.array(run_of), "block": const(b.name),
            "event_index": pa.array(ev.astype(np.int32)), "event_name": _dict_column(names, name_idx[ev]),
            "instruction_id": pa.array(b.instruction_ids.astype(np.int32)[ev]),
            "delegate_debug_id": per_event(dids),
            "debug_handles": per_event([a[0] for a in attrs]), "op_types": per_event([a[1] for a in attrs]),
            "module_path": per_event([a[2] for a in attrs]), "node": per_event([a[3] for a in attrs]),
            "inside_delegate": pa.array(np.asarray(b.is_delegated, bool)[ev]), "backend": per_event(backends),
            "start": pa.array(b.start[ev, col].astype(np.int64)), "duration_ms": pa.array(b.raw[ev, col]),
            "occurrence": pa.array(occ[ev]),
        }
        for key in schema.names[len(COLUMNS):]:
            data[key] = const(meta.get(key))
        tables.append(pa.table(data, schema=schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


# -- workers -------------------------------------------------------------------------------------------
_RECORDS: dict[str, Any] = {}
#: ``{(source, meta): runs}`` already in the dataset, set by :func:`collect` before its workers fork
_PRESENT: dict[tuple[str, str], int] = {}


def record_at(path: str | None) -> Any:
    """The parsed ETRecord of ``path``, read once per process."""
    if not path:
        return None
    if path not in _RECORDS:
        from ..readers.etrecord import read

        _RECORDS[path] = read(path)
    return _RECORDS[path]


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _ingest_batch(paths: list[str], staged: str, name: str, record_path: str | None, meta: dict[str, str | None],
                  extra_meta: list[str], compression: str, mode: str = "append",
                  prompt_lens: list[int] | None = None,
                  present: dict[tuple[str, str], int] | None = None) -> BatchResult:
    """Stream ``paths`` into the staged part ``staged`` (to be committed as ``name``).

    Each file is read once: its bytes are hashed (its identity, with ``meta``) and parsed. A file whose
    identity is in ``present`` (``{(source, meta): runs}``, the dataset's before this collect; ``mode``
    ``skip``) or already in this part (``skip`` / ``replace``) is counted, not parsed."""
    record = record_at(record_path)
    mkey = meta_key(meta)
    present = _PRESENT if present is None else present
    writer = PartWriter(staged, name, compression)
    out = BatchResult()
    runs_of: dict[tuple[str, str], int] = {}
    try:
        for p in paths:
            fault("parse")
            try:
                with open(p, "rb") as f:
                    data = f.read()
            except OSError as exc:
                out.skipped.append((p, one_line(exc)))
                continue
            key = (content_id(data), mkey)
            if mode != "append" and (writer.seen(key) or (mode == "skip" and key in present)):
                out.files += 1
                out.present.append((p, runs_of[key] if writer.seen(key) else present[key]))
                continue
            try:
                table = dump_rows(p, record, meta, extra_meta, data=data, prompt_lens=prompt_lens)
            except (EtlensError, OSError, ValueError, IndexError, KeyError, OverflowError) as exc:
                out.skipped.append((p, one_line(exc)))
                continue
            out.files += 1
            runs = len(np.unique(table["run"].to_numpy())) if table.num_rows else 0
            runs_of[key] = runs
            writer.add(table, SourceInfo(key[0], mkey, runs, table.num_rows, p))
        out.staged = writer.close()
    except BaseException:
        writer.abort()
        raise
    return out


def _batches(paths: list[str], jobs: int, max_batch: int = 64) -> list[list[str]]:
    """Split ``paths`` into batches: about 8 per worker (the bar moves, and the last batch leaves little idle
    time on the other cores), at most ``max_batch`` files each."""
    if not paths:
        return []
    size = max(1, min(max_batch, -(-len(paths) // (jobs * 8))))
    return [paths[i:i + size] for i in range(0, len(paths), size)]


def collect(inputs: Iterable[str], dataset: str, *, meta: dict[str, str] | None = None, etrecord: str | None = None,
            pte: str | None = None, jobs: int | None = None, progress: bool | None = None,
            on_skip: Callable[[str, str], Any] | None = None, compression: str = "zstd",
            mode: str = "skip", prompt_lens: list[int] | None = None) -> CollectResult:
    """Add every profiling event of every run of ``inputs`` (files or directories) to ``dataset``.

    ``meta``: constant columns for these files (``device``, ``build``, ``model`` or any key);
    ``etrecord``: attribute events to debug handles / nodes / module paths; ``pte``: the model id
    (sha256) unless ``meta`` names one. ``jobs``: worker processes (default: CPU count). Bad files
    are skipped and reported through ``on_skip(path, reason)`` and :attr:`CollectResult.skipped`.
    ``mode``: what to do with a dump the dataset already holds under the same metadata — ``skip`` it
    (default: collecting twice adds nothing), ``replace`` the rows of every dump with the same content,
    or ``append`` them again (:mod:`.store`). ``prompt_lens``: an LLM's prompt length per generate session
    (one value: every session of every dump), for the ``phase`` column (:func:`~.phases.with_phases`).
    """
    from .._progress import progress as bar

    global _PRESENT
    t0 = time.perf_counter()
    meta = {k: v for k, v in (meta or {}).items()}
    for key in meta:
        if not key.isidentifier():
            raise EtlensError(f"--meta {key}=…: a column name must be a word of letters, digits and _ "
                              "(e.g. device=pixel7)")
    if meta.get("model") is None and pte:
        meta["model"] = model_id(pte)
    extra = [k for k in meta if k not in META_COLUMNS]
    if etrecord is not None and not os.path.isfile(etrecord):
        raise MissingDataError(f"{etrecord}: ETRecord not found; pass the .etrecord written at export")
    if etrecord is not None:
        record_at(etrecord)   # a bad record is one error up front, not one per file
    paths = find_etdumps(inputs)
    if not paths:
        raise MissingDataError("collect: no ETDumps found in " + ", ".join(map(str, inputs)) +
                               f" (directories are searched for {' / '.join(ETDUMP_SUFFIXES)})")
    if os.path.exists(dataset) and not os.path.isdir(dataset):
        raise EtlensError(f"{dataset}: exists and is not a directory; a dataset is a directory of Parquet files")
    os.makedirs(dataset, exist_ok=True)
    if os.environ.get("ETLENS_FAULT_AT"):
        os.environ.setdefault("ETLENS_FAULT_PID", str(os.getpid()))   # a worker's fault kills the collect
    jobs = max(1, jobs or os.cpu_count() or 1)
    batches = _batches(paths, jobs)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    names = [f"part-{stamp}-{uuid.uuid4().hex[:10]}.parquet" for _ in batches]
    res = CollectResult(dataset=dataset, mode=mode)
    with Staging(dataset) as staging:
        committer = Committer(dataset, mode, staging)
        # the identities already in the dataset: a module global, inherited by forked workers (not pickled
        # into every batch's arguments: a big dataset holds many)
        _PRESENT = {k: s.runs for k, s in committer.present().items()} if mode == "skip" else {}
        args = [(b, staging.path(n), n, etrecord, meta, extra, compression, mode, prompt_lens, None)
                for b, n in zip(batches, names)]
        with bar(total=len(paths), desc="collect", unit="file", enabled=progress) as pbar:
            def done(batch: list[str], out: BatchResult) -> None:
                res.add_batch(out, committer)
                if on_skip is not None:
                    for path, reason in out.skipped:
                        on_skip(path, reason)
                pbar.update(len(batch))

            if jobs == 1 or len(batches) == 1:
                for a in args:
                    done(a[0], _ingest_batch(*a))
            else:
                _parallel(args, jobs, done, warm=(paths[0], etrecord, meta, extra, prompt_lens))
    res.seconds = time.perf_counter() - t0
    return res


def _warm(path: str, record_path: str | None, meta: dict[str, str | None], extra_meta: list[str],
          prompt_lens: list[int] | None = None) -> None:
    """Read one dump in this process before forking the workers: the imports, the program's block
    structure and its ETRecord attribution (a full Inspector, the costly part) are then computed
    once and inherited by every worker instead of once per worker. Errors are left to the worker."""
    import pyarrow.parquet  # noqa: F401 - imported once, inherited

    try:
        dump_rows(path, record_at(record_path), meta, extra_meta, prompt_lens=prompt_lens)
    except Exception:  # noqa: BLE001 - the worker reading this file reports it
        pass


def _parallel(args: list[tuple], jobs: int, done: Callable, warm: tuple | None = None) -> None:
    """Ingest the batches in ``jobs`` forked processes, ``done`` called in the parent per finished batch.

    etlens's second process launcher (the first is :mod:`etlens.builder.worker`, for native ExecuTorch
    work and tool binaries), and it stays apart for a reason: ingestion is pure-Python CPU work over many
    files, which needs a pool of forked copies of this process that share the parent's warmed
    attribution (:func:`_warm`) copy-on-write, not one Python child fed jobs one at a time over a pipe.
    """
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    fork = "fork" in mp.get_all_start_methods()
    ctx = mp.get_context("fork") if fork else mp.get_context("spawn")
    if not fork:        # spawned workers do not inherit the module's state: give them what it holds
        args = [(*a[:-1], dict(_PRESENT)) for a in args]
    if fork and warm is not None:
        _warm(*warm)
    with ProcessPoolExecutor(max_workers=min(jobs, len(args)), mp_context=ctx, initializer=_die_with_parent) as pool:
        futs = {pool.submit(_ingest_batch, *a): a for a in args}
        for fut in as_completed(futs):
            a = futs[fut]
            try:
                out = fut.result()
            except Exception as exc:  # noqa: BLE001 - a worker that died: its files are reported, not lost
                out = BatchResult(skipped=[(p, f"worker failed: {one_line(exc)}") for p in a[0]])
            done(a[0], out)


def _die_with_parent() -> None:
    """Pool initializer (Linux): a worker gets SIGKILL when the collect dies, so a killed collect leaves no
    orphan still writing into its staging directory."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

"""The fleet dataset on disk: immutable parts, the identity of every source run, one committer at a time.

``etlens collect`` must never double-count: a CI job that retries, a user who re-runs an interrupted
collect, two collects started at once into one dataset — each ends with exactly the rows of one clean
collect. This module is how.

**Identity.** A *source* is one ETDump's content: ``source`` = the first 32 hex digits of the sha256 of
its bytes (the path does not matter: a dump copied elsewhere is the same source). A *source run* is
``(source, run index)`` collected under some metadata (the ``--meta`` values, ``model`` included). A
collect skips a dump whose ``(source, metadata)`` the dataset already holds (``mode="skip"``, the
default), swaps the rows of every dump with the same ``source`` whatever their metadata
(``mode="replace"``: a relabelled build, a re-attribution with an ETRecord) or adds everything again
(``mode="append"``, the behaviour before identities). The same dump under *other* metadata (the same
ETDump filed under two builds on purpose) is a different identity and is added.

**Where the identity lives: only inside the part.** Every row carries its ``source`` column, and each
part's Parquet footer (key-value metadata :data:`SOURCES_KEY`) lists the sources it holds — content
hash, metadata, runs, rows, the path it was read from. The footer is written when the part is closed,
so a part is either whole, rows and identities together, or not in the dataset at all; there is no
separate manifest that could disagree with the rows.

**Crash safety.** A part is written under the collect's private staging directory
(``.etlens-staging/<id>/*.parquet.tmp``: hidden, and no ``.parquet`` suffix, so no reader ever lists
it) and renamed into the dataset (``os.replace``: atomic on one file system). A collect killed at any
point leaves whole parts (already committed, found by identity on the next run and skipped) and
staging garbage (deleted by the next collect: a staging directory whose ``<id>.lock`` no live process
holds). ``--replace`` changes several files; it writes ``.etlens-journal.json`` (the files to remove,
then the staged files to rename) before touching any, applies it removals first — so a reader may
briefly miss a swapped source, never see it twice — and the next collect finishes a journal a killed
one left.

**Concurrency.** Commits take ``fcntl.flock`` on ``.etlens.lock`` in the dataset directory: re-read the
identities (a concurrent collect may have committed the same dumps meanwhile), drop what is now present
(rewriting the staged part without it, a rare path), rename. Parsing and writing happen outside the
lock, so collects of different dumps into one dataset still run in parallel; only the commits (a few
milliseconds each) take turns. The lock needs a file system with working ``flock`` (local disks, NFSv4);
see docs/fleet.md.

**Fault injection (tests).** ``ETLENS_FAULT_AT=<point>:<n>[,…]`` kills the collect with SIGKILL at the
n-th time this process reaches ``point`` (:func:`fault`): ``parse`` (before reading a dump), ``write``
(after a dump's rows went into a staged part, before it is closed), ``commit`` (a staged part complete,
not yet renamed), ``committed`` (after a rename: between parts), ``journal`` (a ``--replace`` journal
half applied), ``spark-write`` (in a Spark task). ``ETLENS_FAULT_PID`` names the process to kill
(a worker kills its collect, then itself).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import shutil
import signal
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Iterator

from ..errors import EtlensError
from .columns import COLUMNS, IDENTITY_COLUMNS, ROW_GROUP, writer_options

__all__ = ["SOURCES_KEY", "LOCK_NAME", "STAGING_DIR", "JOURNAL_NAME", "MODES", "SourceInfo", "StagedPart",
           "content_id", "meta_key", "part_sources", "Index", "locked", "Staging", "PartWriter", "Committer",
           "fault", "list_parts"]

#: the Parquet footer key listing a part's sources (JSON list of :class:`SourceInfo`)
SOURCES_KEY = "etlens.sources"
LOCK_NAME = ".etlens.lock"
STAGING_DIR = ".etlens-staging"
JOURNAL_NAME = ".etlens-journal.json"
#: what a collect does with a dump the dataset already holds (see the module doc)
MODES = ("skip", "replace", "append")


def content_id(data: bytes) -> str:
    """A dump's ``source``: the first 32 hex digits (128 bits) of the sha256 of its bytes."""
    return hashlib.sha256(data).hexdigest()[:32]


def meta_key(meta: dict[str, str | None]) -> str:
    """The metadata part of an identity: the non-null ``--meta`` values as canonical JSON."""
    return json.dumps({k: v for k, v in sorted(meta.items()) if v is not None}, sort_keys=True)


@dataclass(frozen=True)
class SourceInfo:
    """One source in one part: its content hash, metadata (:func:`meta_key`), runs, rows, path read."""

    source: str
    meta: str
    runs: int
    rows: int
    file: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.meta)


@dataclass
class StagedPart:
    """A complete part in a staging directory, not yet in the dataset (picklable: Spark tasks return it)."""

    path: str
    name: str
    sources: list[SourceInfo] = field(default_factory=list)


# -- fault injection ---------------------------------------------------------------------------------
_FAULTS: dict[str, int] = {}


def fault(point: str) -> None:
    """Test hook: SIGKILL the collect at the n-th ``point`` when ``$ETLENS_FAULT_AT`` asks (module doc)."""
    spec = os.environ.get("ETLENS_FAULT_AT")
    if not spec:
        return
    for item in spec.split(","):
        name, _, n = item.strip().partition(":")
        if name != point:
            continue
        _FAULTS[point] = count = _FAULTS.get(point, 0) + 1
        if count == int(n or 1):
            target = int(os.environ.get("ETLENS_FAULT_PID") or 0)
            if target and target != os.getpid():
                with contextlib.suppress(OSError):
                    os.kill(target, signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)


# -- reading identities ------------------------------------------------------------------------------
def list_parts(dataset: str) -> list[str]:
    """The dataset's Parquet parts (recursively, hidden directories left out), sorted; [] for none."""
    if not os.path.isdir(dataset):
        return []
    return sorted(glob.glob(os.path.join(glob.escape(dataset), "**", "*.parquet"), recursive=True))


def part_sources(path: str) -> list[SourceInfo] | None:
    """The sources of one part: its footer's list, else (a part another tool wrote from dataset rows,
    e.g. DuckDB's ``COPY … TO``) derived from its ``source`` / ``run`` / metadata columns; None for a
    part without identities (written before they existed: never skipped, never replaced)."""
    import pyarrow.parquet as pq

    try:
        md = pq.read_metadata(path)
    except (OSError, ValueError) as exc:   # pyarrow's ArrowInvalid is a ValueError
        raise EtlensError(f"{path}: not a readable Parquet part ({' '.join(str(exc).split())[:200]}); "
                          "move it out of the dataset") from exc
    kv = md.metadata or {}
    raw = kv.get(SOURCES_KEY.encode())
    if raw is not None:
        return [SourceInfo(**s) for s in json.loads(raw)]
    names = md.schema.names
    if "source" not in names:
        return None
    fixed = {c for c, _ in COLUMNS} | {c for c, _ in IDENTITY_COLUMNS}
    metas = [n for n in names if n not in fixed]
    wanted = [c for c in ["source", "run", "file", *metas] if c in names]
    t = pq.read_table(path, columns=wanted)
    groups: dict[tuple[str, str], tuple[set, int, str]] = {}
    cols = {c: t[c].to_pylist() if c in wanted else [None] * t.num_rows for c in ["source", "run", "file", *metas]}
    for i, src in enumerate(cols["source"]):
        if src is None:
            continue
        key = (src, meta_key({m: cols[m][i] for m in metas}))
        runs, rows, f = groups.get(key, (set(), 0, cols["file"][i]))
        runs.add(cols["run"][i])
        groups[key] = (runs, rows + 1, f)
    return [SourceInfo(s, m, len(r), n, f or "") for (s, m), (r, n, f) in groups.items()]


class Index:
    """The identities in ``dataset``: ``{part path: [SourceInfo]}``, refreshed incrementally."""

    def __init__(self, dataset: str):
        self.dataset = dataset
        self.parts: dict[str, list[SourceInfo]] = {}
        self._stat: dict[str, tuple[int, int]] = {}

    def refresh(self) -> Index:
        seen = set()
        for p in list_parts(self.dataset):
            try:
                st = os.stat(p)
            except FileNotFoundError:     # removed by a concurrent --replace while listing
                continue
            seen.add(p)
            sig = (st.st_mtime_ns, st.st_size)
            if self._stat.get(p) != sig:
                self.parts[p] = part_sources(p) or []
                self._stat[p] = sig
        for p in set(self.parts) - seen:
            del self.parts[p]
            del self._stat[p]
        return self

    def keys(self, exclude: Iterable[str] = ()) -> dict[tuple[str, str], SourceInfo]:
        """``{(source, meta): SourceInfo}`` over the parts (those in ``exclude`` left out)."""
        skip = set(exclude)
        return {s.key: s for p, infos in self.parts.items() if p not in skip for s in infos}

    def parts_with(self, sources: set[str], exclude: Iterable[str] = ()) -> list[str]:
        skip = set(exclude)
        return sorted(p for p, infos in self.parts.items()
                      if p not in skip and any(s.source in sources for s in infos))


# -- locking, staging, journal -----------------------------------------------------------------------
@contextlib.contextmanager
def locked(dataset: str) -> Iterator[None]:
    """Hold ``dataset``'s commit lock (``flock`` on :data:`LOCK_NAME`); on entry finish a journal a killed
    collect left and delete the staging directories of dead collects."""
    import fcntl

    fd = os.open(os.path.join(dataset, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            raise EtlensError(f"{dataset}: cannot lock the dataset ({exc.strerror}); collect into a directory on "
                              "a local disk (or a file system with flock), then copy it") from exc
        _finish_journal(dataset)
        _sweep(dataset)
        yield
    finally:
        os.close(fd)     # closing releases the lock


def _sweep(dataset: str) -> None:
    """Delete staging directories whose owner is gone (its ``<id>.lock`` is free). Caller holds the lock."""
    import fcntl

    root = os.path.join(dataset, STAGING_DIR)
    if not os.path.isdir(root):
        return
    for lock in glob.glob(os.path.join(glob.escape(root), "*.lock")):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                continue          # a live collect's
            raise
        shutil.rmtree(lock[:-len(".lock")], ignore_errors=True)
        os.unlink(lock)
        os.close(fd)
    for d in os.listdir(root):    # a directory without its lock file: created by a collect killed at birth
        full = os.path.join(root, d)
        if os.path.isdir(full) and not os.path.exists(full + ".lock"):
            shutil.rmtree(full, ignore_errors=True)


def _finish_journal(dataset: str) -> None:
    """Apply a journal a killed ``--replace`` left (removals, then renames; both idempotent)."""
    path = os.path.join(dataset, JOURNAL_NAME)
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        try:
            plan = json.load(f)
        except ValueError:       # never renamed into place whole: nothing of it was applied
            plan = {"remove": [], "rename": []}
    _apply(dataset, plan, path)


def _apply(dataset: str, plan: dict, journal: str) -> None:
    for name in plan["remove"]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(dataset, name))
    fault("journal")
    for staged, name in plan["rename"]:
        if os.path.exists(staged):
            os.replace(staged, os.path.join(dataset, name))
    os.unlink(journal)


def _write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Staging:
    """A collect's private directory for unfinished parts, held (``flock`` on ``<id>.lock``) while it lives."""

    def __init__(self, dataset: str):
        import fcntl

        self.dataset = dataset
        root = os.path.join(dataset, STAGING_DIR)
        self.id = uuid.uuid4().hex[:12]
        self.dir = os.path.join(root, self.id)
        with locked(dataset):     # created under the dataset lock: a sweep never sees it half made
            os.makedirs(root, exist_ok=True)
            self._fd = os.open(self.dir + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.makedirs(self.dir)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name + ".tmp")

    def close(self) -> None:
        if self._fd < 0:
            return
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.dir + ".lock")
        os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# -- writing -----------------------------------------------------------------------------------------
def with_source(table: Any, source: str) -> Any:
    """``table`` with its identity column (``source``, dictionary-encoded, one value) appended."""
    import numpy as np
    import pyarrow as pa

    col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(table.num_rows, np.int32)), pa.array([source]))
    return table.append_column(pa.field("source", col.type), col)


class PartWriter:
    """Streams dumps' tables into one staged part; :meth:`close` writes the footer and names the sources.

    The same ``(source, meta)`` twice in one part is written once (:meth:`seen`)."""

    def __init__(self, staged_path: str, name: str, compression: str = "zstd"):
        self.path, self.name, self.compression = staged_path, name, compression
        self.sources: list[SourceInfo] = []
        self._keys: set[tuple[str, str]] = set()
        self._writer: Any = None

    def seen(self, key: tuple[str, str]) -> bool:
        return key in self._keys

    def add(self, table: Any, info: SourceInfo) -> None:
        import pyarrow.parquet as pq

        self._keys.add(info.key)
        if table.num_rows == 0:
            return
        table = with_source(table, info.source)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, table.schema, **writer_options(table.schema, self.compression))
        self._writer.write_table(table, row_group_size=ROW_GROUP)
        self.sources.append(info)
        fault("write")

    def close(self) -> StagedPart | None:
        """Finish the staged file (footer with the sources); None when no rows were written."""
        if self._writer is None:
            return None
        self._writer.add_key_value_metadata({SOURCES_KEY: json.dumps([asdict(s) for s in self.sources])})
        self._writer.close()
        self._writer = None
        return StagedPart(self.path, self.name, list(self.sources))

    def abort(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _rewrite(src: str, dst: str, drop: set[str], sources: list[SourceInfo]) -> StagedPart | None:
    """``src`` without the rows of the sources ``drop`` into ``dst`` (footer updated); None when nothing is left."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    keep = [s for s in sources if s.source not in drop]
    pf = pq.ParquetFile(src)
    writer = None
    try:
        for i in range(pf.num_row_groups):
            t = pf.read_row_group(i)
            if "source" in t.column_names:
                t = t.filter(pc.invert(pc.is_in(t["source"].cast(pa.string()), pa.array(sorted(drop)))))
            if not t.num_rows:
                continue
            if writer is None:
                writer = pq.ParquetWriter(dst, t.schema, **writer_options(t.schema))
            writer.write_table(t, row_group_size=ROW_GROUP)
        if writer is None:
            return None
        writer.add_key_value_metadata({SOURCES_KEY: json.dumps([asdict(s) for s in keep])})
    finally:
        if writer is not None:
            writer.close()
    return StagedPart(dst, os.path.basename(src), keep)


# -- committing --------------------------------------------------------------------------------------
class Committer:
    """Moves a collect's staged parts into ``dataset``, one at a time under the lock, by ``mode`` (module doc).

    :meth:`commit` returns ``(added, present, replaced)``: the sources now in the dataset from that part,
    those dropped because the dataset (or this collect, or a concurrent one) already holds them, and how
    many old runs ``replace`` took out."""

    def __init__(self, dataset: str, mode: str = "skip", staging: Staging | None = None):
        if mode not in MODES:
            raise EtlensError(f"collect mode {mode!r}: choose one of {', '.join(MODES)}")
        self.dataset, self.mode, self.staging = dataset, mode, staging
        self.index = Index(dataset)
        self.mine: set[str] = set()        # parts this collect committed (replace never swaps those)

    def present(self) -> dict[tuple[str, str], SourceInfo]:
        """The identities the dataset holds now (read under the lock)."""
        with locked(self.dataset):
            return dict(self.index.refresh().keys())

    def commit(self, staged: StagedPart) -> tuple[list[SourceInfo], list[SourceInfo], int]:
        with locked(self.dataset):
            fault("commit")
            self.index.refresh()
            final = os.path.join(self.dataset, staged.name)
            if self.mode == "append":
                os.replace(staged.path, final)
                self.mine.add(final)
                fault("committed")
                return list(staged.sources), [], 0
            there = self.index.keys(exclude=() if self.mode == "skip" else set(self.index.parts) - self.mine)
            dup = [s for s in staged.sources if s.key in there]
            keep = [s for s in staged.sources if s.key not in there]
            if not keep:
                os.unlink(staged.path)
                return [], dup, 0
            if dup:       # a concurrent collect (or an earlier batch of this one) committed some meanwhile
                part = _rewrite(staged.path, staged.path + ".k", {s.source for s in dup}, staged.sources)
                os.unlink(staged.path)
                assert part is not None
                os.replace(part.path, staged.path)
            swap = self.index.parts_with({s.source for s in keep}, exclude=self.mine) if self.mode == "replace" \
                else []
            replaced = 0
            if not swap:
                os.replace(staged.path, final)
            else:
                replaced = self._swap(staged, final, swap, {s.source for s in keep})
            self.mine.add(final)
            fault("committed")
            return keep, dup, replaced

    def _swap(self, staged: StagedPart, final: str, olds: list[str], sources: set[str]) -> int:
        """``--replace``: the old parts holding ``sources`` lose those rows, then ``staged`` comes in (journal)."""
        where = os.path.dirname(staged.path)
        plan: dict[str, list] = {"remove": [], "rename": []}
        replaced = sum(s.runs for old in olds for s in self.index.parts.get(old, []) if s.source in sources)
        for old in olds:
            rel = os.path.relpath(old, self.dataset)
            plan["remove"].append(rel)
            name = f"part-{uuid.uuid4().hex[:16]}.parquet"
            part = _rewrite(old, os.path.join(where, name + ".tmp"), sources, self.index.parts.get(old, []))
            if part is not None:
                plan["rename"].append([part.path, os.path.join(os.path.dirname(rel), name)])
        plan["rename"].append([staged.path, os.path.relpath(final, self.dataset)])
        journal = os.path.join(self.dataset, JOURNAL_NAME)
        _write_atomic(journal, json.dumps(plan))
        _apply(self.dataset, plan, journal)
        return replaced

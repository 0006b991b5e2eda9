"""Shared fuzzing harness: seed corpora, mutations, and the "result or EtlensError" oracle.

Used by the quick sample in ``tests/robustness`` (default suite), the long target in
``tests/fuzz`` (``pytest -m fuzz tests/fuzz``) and ``benchmarks/fuzz_readers.py`` (a plain random
loop that collects *every* failure class instead of stopping at the first).

The oracle, per input (:func:`check`):

* the reader's ``read(path)`` and then the lazy parts — ``summary()``, ``graphs()``,
  ``Graph.lint()``/``to_json()``; for an ETDump also every debug tensor against the debug buffer —
  end in a result or an :class:`etlens.errors.EtlensError` subclass; anything else is a failure;
* each attempt runs under a 2 s CPU-time timer (``SIGPROF``, plus a 20 s wall-clock backstop); a
  timeout is retried once, a real hang times out twice;
* the Python-heap peak (``tracemalloc``, which numpy reports its buffers to) stays under 200 MB,
  so a reader that believes a header saying "2^31 elements" is caught even when the OS would
  have lazily over-committed the allocation.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import random
import signal
import struct
import time
import tracemalloc
import traceback
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

TIME_LIMIT_S = 2.0
MEM_LIMIT_BYTES = 200 << 20

#: Values written over length / offset / count positions.
ABSURD_U32 = (0, 1, 3, 0x7F, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF, 0x7FFFFFFC,
              0x3FFFFFFF, 0x00FFFFFF)
ABSURD_U16 = (0, 1, 2, 3, 0x7FFF, 0x8000, 0xFFFF, 0xFFFE)
ABSURD_I64 = (-1, -(2 ** 63), 2 ** 63 - 1, 2 ** 40, 2 ** 31, 2 ** 32 + 7, -4096)
FILL_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x41, 0x22, 0x5C)

EXT = {"pte": ".pte", "bpte": ".bpte", "etdump": ".etdp", "etrecord": ".etrecord", "pt2": ".pt2", "trace": ".json",
       "graph": ".json"}


class Timeout(BaseException):
    """Raised by the SIGALRM handler; a BaseException so readers' ``except Exception`` cannot eat it."""


@dataclass
class Outcome:
    ok: bool                      # a result came back
    error: str | None = None      # EtlensError subclass name
    failure: str | None = None    # anything else: the formatted exception (a bug)
    elapsed: float = 0.0
    peak: int = 0


@dataclass
class Stats:
    inputs: int = 0
    results: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (signature, detail)
    slowest: float = 0.0
    peak: int = 0

    def add(self, o: Outcome, label: str = "") -> None:
        self.inputs += 1
        self.results += o.ok
        if o.error:
            self.errors[o.error] = self.errors.get(o.error, 0) + 1
        if o.failure:
            self.failures.append((signature(o.failure), f"{label}\n{o.failure}"))
        self.slowest = max(self.slowest, o.elapsed)
        self.peak = max(self.peak, o.peak)


def signature(failure: str) -> str:
    """``ExcType @ file:line`` of the innermost etlens frame, to group failures by bug."""
    lines = failure.strip().splitlines()
    exc = lines[-1].split(":")[0] if lines else "?"
    where = "?"
    for ln in lines:
        s = ln.strip()
        if s.startswith("File ") and "etlens" in s and "/tests/" not in s:
            parts = s.split('"')
            where = f"{os.path.basename(parts[1])}:{s.split('line ')[1].split(',')[0]}"
    return f"{exc} @ {where}"


# -- what "read it" means per format ----------------------------------------------------------------
def _touch_graphs(art: Any) -> None:
    art.summary()
    for g in art.graphs().values():
        g.lint()
        g.to_json()


def exercise(kind: str, path: str, debug: str | None = None) -> None:
    """Read ``path`` with the ``kind`` reader and run every lazy part a user can reach."""
    if kind == "pte":
        from etlens.readers import pte as mod
    elif kind == "etdump":
        from etlens.readers import etdump as mod
    elif kind == "etrecord":
        from etlens.readers import etrecord as mod
    elif kind == "pt2":
        from etlens.readers import exported as mod
    elif kind == "trace":
        from etlens.readers import trace as mod
    elif kind == "graph":
        from etlens.readers.trace import read_graph_json

        _touch_graphs(read_graph_json(path))
        return
    elif kind == "bpte":
        from etlens.analysis.memory import analyze_memory
        from etlens.analysis.size import analyze_size
        from etlens.readers import bpte

        art = bpte.read(path)
        _touch_graphs(art)
        for suite in art.suites:
            for case in suite.cases:
                for v in case.inputs + case.expected_outputs:
                    v.array()
        analyze_memory(art.pte)
        analyze_size(art.program_bytes(), path)
        return
    elif kind == "sniff":
        from etlens.readers import read

        _touch_graphs(read(path))
        return
    else:
        raise ValueError(kind)
    art = mod.read(path)
    _touch_graphs(art)
    if kind == "pte":
        from etlens.analysis.memory import analyze_memory
        from etlens.analysis.size import size_of_file

        analyze_memory(art)
        size_of_file(path)
    if kind == "etdump":
        decode_debug(art.dump, debug)
    elif kind == "etrecord":
        art.debug_handle_map, art.delegate_map  # noqa: B018 - parsed maps
        for stage in art.stages:
            art.graph(stage)


def decode_debug(dump: Any, debug: str | None) -> None:
    """Decode every debug event's value; with a buffer, read every tensor's bytes."""
    from etlens.readers.etdump import DebugBuffer

    buf = DebugBuffer(debug) if debug else None
    for r, run in enumerate(dump.runs):
        for i in run.debug_indices():
            v = dump.debug_value(r, int(i), buf)
            for t in v if isinstance(v, list) else [v]:
                if hasattr(t, "sum") and getattr(t, "numel", lambda: 0)() < (1 << 20):
                    t.float().sum() if hasattr(t, "float") else t.sum()


@contextlib.contextmanager
def _alarm(seconds: float):
    """Interrupt the input after ``seconds`` of CPU time (``ITIMER_PROF``), or 10x that of wall time.

    CPU time, because the 2-core test machine is shared: a 0.3 s parse can take 3 s of wall time
    while other jobs run, but a reader stuck in a loop burns CPU and is caught either way. The
    wall-clock backstop catches a reader blocked without burning CPU.
    """
    def _fire(signum, frame):
        raise Timeout(f"over {seconds} s of CPU time" if signum == signal.SIGPROF else
                      f"over {10 * seconds} s of wall time")

    old_prof = signal.signal(signal.SIGPROF, _fire)
    old_alrm = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, 10 * seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alrm)


def _attempt(fn: Callable[[], None], time_limit: float) -> Outcome:
    from etlens.errors import EtlensError

    tracing = tracemalloc.is_tracing()
    if tracing:
        tracemalloc.reset_peak()
    t0 = time.process_time()
    out = Outcome(ok=False)
    try:
        with _alarm(time_limit):
            fn()
        out.ok = True
    except EtlensError as exc:
        out.error = type(exc).__name__
        if not str(exc).strip():
            out.failure = f"{type(exc).__name__} with an empty message"
    except Timeout as exc:
        out.failure = f"Timeout: {exc}"
    except BaseException as exc:  # noqa: BLE001 - the whole point: anything else is a bug
        if isinstance(exc, KeyboardInterrupt):
            raise
        out.failure = "".join(traceback.format_exception(exc))
    out.elapsed = time.process_time() - t0  # CPU seconds (see _alarm)
    if tracing:
        out.peak = tracemalloc.get_traced_memory()[1]
        if out.peak > MEM_LIMIT_BYTES and not out.failure:
            out.failure = f"MemoryBlowup: Python heap peak {out.peak >> 20} MB over {MEM_LIMIT_BYTES >> 20} MB"
    return out


def check(kind: str, data: bytes, workdir: str | os.PathLike, *, debug: bytes | str | None = None,
          time_limit: float = TIME_LIMIT_S, name: str = "input") -> Outcome:
    """Write ``data`` (and a debug buffer) under ``workdir`` and run :func:`exercise` under the oracle."""
    workdir = Path(workdir)
    path = workdir / f"{name}{EXT.get(kind, '.bin')}"
    path.write_bytes(data)
    dbg_path = None
    if isinstance(debug, (bytes, bytearray)):
        dbg_path = workdir / f"{name}.debug.bin"
        dbg_path.write_bytes(debug)
    elif debug:
        dbg_path = debug
    fn = lambda: exercise(kind, str(path), str(dbg_path) if dbg_path else None)  # noqa: E731
    out = _attempt(fn, time_limit)
    if out.failure and out.failure.startswith("Timeout"):
        out = _attempt(fn, time_limit)  # a loaded machine gets one retry; a real hang fails again
    return out


_WARM = False


def warm_up(seeds: dict[str, list[tuple[str, bytes]]], workdir: str | os.PathLike) -> None:
    """Import torch and run every seed once, untimed: first-import cost is not a reader's hang
    (and a SIGALRM raised inside torch's C++ import machinery would abort the process)."""
    global _WARM
    if _WARM:
        return
    _WARM = True
    import logging

    import torch
    import torch.export  # noqa: F401

    torch.set_num_threads(1)  # CPU-time budgets assume one thread (and the machine is shared)

    # torch.export.load logs every refused archive with a full traceback; the oracle judges them
    logging.getLogger("torch.export").setLevel(logging.CRITICAL)

    for kind, items in seeds.items():
        for _label, data in items if kind == "pt2" else items[:1]:
            path = Path(workdir) / f"warm{EXT.get(kind, '.bin')}"
            path.write_bytes(data)
            with contextlib.suppress(Exception):
                exercise(kind, str(path))


@contextlib.contextmanager
def memory_tracing():
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        yield
    finally:
        if started:
            tracemalloc.stop()


# -- seeds -----------------------------------------------------------------------------------------
def committed_seeds() -> dict[str, list[tuple[str, bytes]]]:
    """``{kind: [(label, bytes)]}`` from ``tests/data`` plus trace/graph JSON built from them."""
    manifest = json.loads((DATA / "manifest.json").read_text())
    seeds: dict[str, list[tuple[str, bytes]]] = {k: [] for k in ("pte", "etdump", "etrecord", "pt2")}
    for case, files in sorted(manifest.items()):
        for kind, key in (("pte", "pte"), ("etdump", "etdump"), ("etrecord", "etrecord"), ("pt2", "pt2")):
            if key in files:
                seeds[kind].append((f"{case}.{kind}", (DATA / files[key]).read_bytes()))
    seeds.update(json_seeds([str(DATA / manifest[c]["pte"]) for c in sorted(manifest) if "pte" in manifest[c]]))
    # a bundled program written by ExecuTorch's serializer (tests/memsize/make_bpte.py)
    seeds["bpte"] = [("bundled_small.bpte", (DATA / "bundled_small.bpte").read_bytes())]
    return seeds


def json_seeds(pte_paths: Iterable[str]) -> dict[str, list[tuple[str, bytes]]]:
    """Graph JSON and a multi-snapshot trace JSON built from the graphs of real programs."""
    from etlens.model.trace import Snapshot, Trace
    from etlens.readers import pte

    graphs, traces = [], []
    for p in pte_paths:
        art = pte.read(p)
        gs = list(art.graphs().values())
        for g in gs:
            graphs.append((f"{os.path.basename(p)}.{g.name}.graph.json",
                           json.dumps(g.to_json(), sort_keys=True).encode()))
        snaps = [Snapshot(name=f"s{i}", stage="pass", index=i, graph=g) for i, g in enumerate(gs * 2)]
        t = Trace(model=os.path.basename(p), backend="fuzz", snapshots=snaps)
        traces.append((f"{os.path.basename(p)}.trace.json", t.dumps().encode()))
    return {"graph": graphs, "trace": traces}


def debug_seed() -> tuple[bytes, bytes]:
    """A committed ETDump with debug events and its debug buffer."""
    return (DATA / "mlp_portable.etdp").read_bytes(), (DATA / "mlp_portable.debug.bin").read_bytes()


# -- mutations -------------------------------------------------------------------------------------
def flatbuffer_hot_positions(data: bytes, limit: int = 4000) -> list[int]:
    """Byte positions that probably hold FlatBuffer offsets, vector lengths or vtable entries.

    Heuristic, format-free: a 4-aligned u32 ``v`` at ``p`` with ``p + v`` inside the file is an
    offset; its target holds a vector length or a table's soffset to its vtable, whose u16 entries
    are field offsets. Writing absurd values exactly there reaches the bounds checks that random
    bit flips mostly miss.
    """
    n = len(data)
    hot: set[int] = set()
    for p in range(0, n - 3, 4):
        v = struct.unpack_from("<I", data, p)[0]
        t = p + v
        if 4 <= v and t + 4 <= n:
            hot.add(p)
            hot.add(t)
            s = struct.unpack_from("<i", data, t)[0]
            vt = t - s
            if 0 <= vt and vt + 4 <= n and s != 0:
                vsize = struct.unpack_from("<H", data, vt)[0]
                if 4 <= vsize <= 128 and vt + vsize <= n:
                    hot.update(range(vt, vt + vsize, 2))
    out = sorted(hot)
    if len(out) > limit:
        out = sorted(random.Random(0).sample(out, limit))
    return out


def apply_ops(data: bytes, ops: Iterable[tuple]) -> bytes:
    """Apply mutation ops (see :func:`random_ops`) to ``data`` and return the new bytes."""
    b = bytearray(data)
    for op in ops:
        if not b:
            break
        kind = op[0]
        if kind == "truncate":
            del b[min(op[1], len(b)):]
        elif kind == "flip":
            p = op[1] % len(b)
            b[p] ^= 1 << op[2]
        elif kind == "run":
            p = op[1] % len(b)
            b[p:p + op[2]] = bytes([op[3]]) * len(b[p:p + op[2]])
        elif kind in ("u32", "u16", "i64"):
            fmt, size = {"u32": ("<I", 4), "u16": ("<H", 2), "i64": ("<q", 8)}[kind]
            p = op[1] % len(b)
            if p + size <= len(b):
                value = op[2] & (0xFFFFFFFF if kind == "u32" else 0xFFFF) if kind != "i64" else op[2]
                struct.pack_into(fmt, b, p, value)
        elif kind == "insert":
            p = op[1] % (len(b) + 1)
            b[p:p] = op[2]
        elif kind == "delete":
            p = op[1] % len(b)
            del b[p:p + op[2]]
        elif kind == "dup":  # copy a slice elsewhere (moves real structure to a wrong place)
            p, q, ln = op[1] % len(b), op[2] % len(b), op[3]
            chunk = bytes(b[p:p + ln])
            b[q:q + len(chunk)] = chunk
    return bytes(b)


def _fix_u32(kind: str, v: int) -> int:
    return v & 0xFFFF if kind == "u16" else v


def random_ops(rng: random.Random, n: int, hot: list[int]) -> list[tuple]:
    """A short random list of mutation ops over a file of ``n`` bytes."""
    def pos() -> int:
        return rng.choice(hot) if hot and rng.random() < 0.7 else rng.randrange(max(n, 1))

    ops: list[tuple] = []
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        r = rng.random()
        if r < 0.25:
            ops.append(("u32", pos() & ~3 if rng.random() < 0.8 else pos(),
                        rng.choice(ABSURD_U32 + (n, n + 4, n - 4, rng.getrandbits(32)))))
        elif r < 0.38:
            ops.append(("u16", pos() & ~1, rng.choice(ABSURD_U16)))
        elif r < 0.45:
            ops.append(("i64", pos(), rng.choice(ABSURD_I64)))
        elif r < 0.65:
            ops.append(("flip", pos(), rng.randrange(8)))
        elif r < 0.75:
            ops.append(("run", pos(), rng.choice((1, 4, 8, 64, 512)), rng.choice(FILL_BYTES)))
        elif r < 0.82:
            ops.append(("insert", pos(), bytes(rng.getrandbits(8) for _ in range(rng.choice((1, 4, 7))))))
        elif r < 0.88:
            ops.append(("delete", pos(), rng.choice((1, 4, 16))))
        else:
            ops.append(("dup", pos(), pos(), rng.choice((4, 8, 32))))
    if rng.random() < 0.2:
        ops.append(("truncate", rng.randrange(max(n, 1))))
    return ops


# -- zip-aware mutations (ETRecord, .pt2): change an entry's content, keep the zip valid -------------
def zip_entries(data: bytes) -> list[tuple[zipfile.ZipInfo, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i, z.read(i)) for i in z.infolist()]


def build_zip(entries: Iterable[tuple[str | zipfile.ZipInfo, bytes]],
              compression: int = zipfile.ZIP_STORED) -> bytes:
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", compression) as z:
        for name, payload in entries:
            info = name if isinstance(name, zipfile.ZipInfo) else zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            info.compress_type = compression
            z.writestr(info, payload)
    return bio.getvalue()


def mutate_json_value(rng: random.Random, doc: Any, depth: int = 0) -> Any:
    """Replace one random value deep inside a JSON document with a hostile one."""
    hostile = [None, -1, 0, 2 ** 31, 10 ** 30, -(2 ** 63), 1.5, "", "x" * 1000, [], {}, [[[]]], True,
               "</script>", {"a": None}, [None] * 3, "\ud800" if False else "\u202e"]
    if depth > 40 or not isinstance(doc, (dict, list)) or not doc or rng.random() < 0.15:
        return rng.choice(hostile)
    if isinstance(doc, dict):
        k = rng.choice(list(doc))
        r = rng.random()
        if r < 0.1:
            return {kk: vv for kk, vv in doc.items() if kk != k}  # drop a key
        doc = dict(doc)
        doc[k] = mutate_json_value(rng, doc[k], depth + 1)
        return doc
    i = rng.randrange(len(doc))
    doc = list(doc)
    r = rng.random()
    if r < 0.1:
        del doc[i]
    elif r < 0.15:
        doc.append(doc[i])
    else:
        doc[i] = mutate_json_value(rng, doc[i], depth + 1)
    return doc


def mutate_zip(rng: random.Random, data: bytes) -> bytes:
    """Rebuild the archive with one entry's content mutated (valid CRCs, so the reader sees it)."""
    entries = zip_entries(data)
    idx = rng.randrange(len(entries))
    info, payload = entries[idx]
    if payload[:1] in (b"{", b"[") and rng.random() < 0.7:
        try:
            doc = json.loads(payload)
            payload = json.dumps(mutate_json_value(rng, doc)).encode()
        except ValueError:
            pass
    else:
        payload = apply_ops(payload, random_ops(rng, len(payload), flatbuffer_hot_positions(payload, 500)
                                                if len(payload) < 200_000 else []))
    r = rng.random()
    if r < 0.05:
        entries = [e for j, e in enumerate(entries) if j != idx]  # drop the entry
    else:
        entries[idx] = (info.filename, payload)
    return build_zip((i.filename if isinstance(i, zipfile.ZipInfo) else i, p) for i, p in entries)


def mutate_json_text(rng: random.Random, data: bytes) -> bytes:
    """Structural (valid JSON, hostile values) or textual mutation of a JSON document."""
    if rng.random() < 0.6:
        doc = json.loads(data)
        return json.dumps(mutate_json_value(rng, doc)).encode()
    return apply_ops(data, random_ops(rng, len(data), []))


# -- hand-made hostile inputs -----------------------------------------------------------------------
def deep_json(depth: int = 100_000, head: str = "") -> bytes:
    return (head + "[" * depth + "]" * depth + ("}" if head else "")).encode()


def zip_with_declared_size(data: bytes, entry: str, size: int) -> bytes:
    """Patch the central-directory and local-header uncompressed size of ``entry``."""
    b = bytearray(data)
    name = entry.encode()
    p = 0
    while True:
        p = b.find(b"PK\x01\x02", p)
        if p < 0:
            break
        nlen = struct.unpack_from("<H", b, p + 28)[0]
        if bytes(b[p + 46:p + 46 + nlen]) == name:
            struct.pack_into("<I", b, p + 24, size)
            local = struct.unpack_from("<I", b, p + 42)[0]
            struct.pack_into("<I", b, local + 22, size)
        p += 4
    return bytes(b)


@functools.lru_cache(maxsize=4)
def zip_bomb_entry(size: int = 64 << 20) -> bytes:
    """A deflate stream of ``size`` zero bytes (about size/1000 bytes long)."""
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1 << 20)
    parts = [co.compress(chunk) for _ in range(size >> 20)]
    parts.append(co.flush())
    return b"".join(parts)


def raw_zip(entries: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A zip written by hand: ``(name, payload, method, crc, uncompressed_size)`` per entry.

    Lets a test declare sizes and CRCs that ``zipfile`` would never write (bombs, lies).
    """
    out = bytearray()
    central = bytearray()
    for name, payload, method, crc, usize in entries:
        nb = name.encode()
        off = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(payload), usize,
                           len(nb), 0) + nb + payload
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(payload),
                               usize, len(nb), 0, 0, 0, 0, 0, off) + nb
    cd_off = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), cd_off, 0)
    return bytes(out)

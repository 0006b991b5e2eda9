"""Coverage-guided fuzzing of every etlens reader (atheris / libFuzzer), seeded with real artifacts.

Not part of any test run: a tool to run for minutes per format, in the background. For each format a
child process instruments etlens' own code (``atheris.instrument_imports``: every branch of the
readers, the model and the analyses they feed is a coverage point), seeds libFuzzer with real files
written by ExecuTorch 1.5.1 (``tests/data``, ``tests/analysis/inspector/data`` and, with ``--extra``,
e.g. the fixture cache), and mutates them coverage-first. Mutations are structure-aware where bytes
alone mostly hit the outer checks: an ETRecord (a zip) gets one entry changed and the archive rebuilt
with valid CRCs, JSON gets hostile values at valid positions, FlatBuffers get absurd values written at
offset / length / vtable positions — half the time; libFuzzer's own byte mutations the other half.

The oracle is the robustness harness's (``tests/robustness/_harness.py``): reading the input and
every lazy part a user can reach (summary, graphs, lint, JSON, memory plan, size; every debug tensor
of an ETDump) must end in a result or an :class:`etlens.errors.EtlensError`. A failure is anything
else: another exception, over 5 s of CPU time (a hang), or an allocation past 1 GB above the
start (``RLIMIT_AS``: the allocation fails with ``MemoryError``, which is a failure). Each distinct
failure (exception type + innermost etlens frame) is saved once, with its traceback, under
``OUT/<format>/failures/``; fuzzing goes on. A native crash ends the child, is saved by libFuzzer under
the same directory, and the child is restarted for the time that is left.

Usage::

    nice -n 19 .venv/bin/python scripts/fuzz_readers.py --seconds 600 --out /tmp/fuzz pte etdump etrecord
    .venv/bin/python scripts/fuzz_readers.py --list

Prints, per format: executions, coverage (libFuzzer's ``cov``: instrumented edges reached) at start
and end, corpus inputs added for new coverage, distinct failures; ``OUT/summary.json`` keeps them.
Turn a saved failure into a regression case: copy it to ``tests/fuzz/cases/<format>/`` (the default
test run reads every file there, ``tests/fuzz/test_fuzz_cases.py``). Needs ``pip install atheris``
(in the ``dev`` extra).

Adding a format: one entry in :data:`FORMATS` — a seed function and an exercise function. The
Ethos-U / Vela payload reader is one (``vela``): its seeds are the delegate payloads cut out of real
Arm-lowered ``.pte`` files given with ``--extra``; with none, it has no seeds and is not run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TIME_LIMIT_S = 5.0
MEMORY_BYTES = 1 << 30
MAX_SEED_BYTES = 1 << 20


# -- seeds -----------------------------------------------------------------------------------------
def _files(patterns: list[str], extra: str | None) -> list[Path]:
    dirs = [ROOT / "tests" / "data", ROOT / "tests" / "analysis" / "inspector" / "data"]
    if extra:
        dirs += [Path(extra)]
    out = []
    for d in dirs:
        for pat in patterns:
            out += [p for p in sorted(d.rglob(pat)) if p.is_file() and p.stat().st_size <= MAX_SEED_BYTES]
    return out


def _seed_files(ext: str) -> Callable[[str | None], list[bytes]]:
    return lambda extra: [p.read_bytes() for p in _files([f"*{ext}"], extra)]


def _json_seeds(which: str) -> Callable[[str | None], list[bytes]]:
    def seeds(extra: str | None) -> list[bytes]:
        from tests.robustness import _harness as H

        built = H.json_seeds([str(p) for p in _files(["*.pte"], extra)])
        return [data for _, data in built[which]]
    return seeds


def _debug_seeds(extra: str | None) -> list[bytes]:
    """A debug buffer paired with its real ETDump (the ETDump stays fixed; see ``_exercise_debug``)."""
    return [(ROOT / "tests" / "data" / "mlp_portable.debug.bin").read_bytes()[:16384]]


def _vela_seeds(extra: str | None) -> list[bytes]:
    """Ethos-U delegate payloads (Vela bin streams) cut out of the real ``.pte`` seeds that have one (with
    ``--extra`` pointing at programs lowered with the Arm backend): from the ``vela_bin_stream`` block header
    to the end of the ``vela_end_stream`` one (32-byte headers, see ``etlens.backends.ethosu.payload``)."""
    out = []
    for p in _files(["*.pte"], extra):
        data = p.read_bytes()
        start = data.find(b"vela_bin_stream\0")
        end = data.find(b"vela_end_stream\0", start)
        if start >= 0 and end > start:
            out.append(data[start:end + 32])
    return out


def _exercise_vela(data: bytes, work: str) -> None:
    from etlens.backends.ethosu.payload import decode_ethosu

    p = decode_ethosu(data, name="fuzz input")
    repr(p)


# -- what reading an input means ---------------------------------------------------------------------
def _exercise_file(kind: str, ext: str) -> Callable[[bytes, str], None]:
    from tests.robustness import _harness as H

    def run(data: bytes, work: str) -> None:
        path = os.path.join(work, "input" + ext)
        with open(path, "wb") as f:
            f.write(data)
        H.exercise(kind, path)
    return run


def _exercise_debug(data: bytes, work: str) -> None:
    from tests.robustness import _harness as H

    path = os.path.join(work, "input.debug.bin")
    with open(path, "wb") as f:
        f.write(data)
    H.exercise("etdump", str(ROOT / "tests" / "data" / "mlp_portable.etdp"), path)


#: format -> (seed function, exercise factory, mutation style, file suffix)
FORMATS: dict[str, tuple[Callable[[str | None], list[bytes]], Callable[[], Callable[[bytes, str], None]], str, str]] = {
    "pte": (_seed_files(".pte"), lambda: _exercise_file("pte", ".pte"), "flatbuffer", ".pte"),
    "etdump": (_seed_files(".etdp"), lambda: _exercise_file("etdump", ".etdp"), "flatbuffer", ".etdp"),
    "debug": (_debug_seeds, lambda: _exercise_debug, "bytes", ".debug.bin"),
    "etrecord": (_seed_files(".etrecord"), lambda: _exercise_file("etrecord", ".etrecord"), "zip", ".etrecord"),
    "bpte": (_seed_files(".bpte"), lambda: _exercise_file("bpte", ".bpte"), "flatbuffer", ".bpte"),
    "trace": (_json_seeds("trace"), lambda: _exercise_file("trace", ".json"), "json", ".json"),
    "graph": (_json_seeds("graph"), lambda: _exercise_file("graph", ".json"), "json", ".json"),
    # the Ethos-U payload reader: seeds only where real Arm-lowered programs are given (--extra)
    "vela": (_vela_seeds, lambda: _exercise_vela, "bytes", ".vela.bin"),
}
DEFAULT = ("pte", "etdump", "debug", "etrecord", "bpte", "trace", "graph", "vela")


# -- the child: one format under atheris ---------------------------------------------------------------
def _signature(tb: str) -> str:
    from tests.robustness import _harness as H

    return H.signature(tb)


def child(kind: str, seconds: float, out: Path, extra: str | None, seed: int) -> int:
    import atheris

    seeds_fn, exercise_factory, style, ext = FORMATS[kind]
    with atheris.instrument_imports(include=["etlens"]):
        import etlens.analysis.bundled  # noqa: F401
        import etlens.analysis.memory  # noqa: F401
        import etlens.analysis.size  # noqa: F401
        import etlens.model  # noqa: F401
        import etlens.readers  # noqa: F401
        import etlens.schema  # noqa: F401
        from etlens.readers import bpte, etdump, etrecord, pte, registry, trace  # noqa: F401
        import importlib
        import pkgutil

        # every module of the readers, the model and the schema now, so lazily imported ones are instrumented too
        for pkg in (etlens.readers, etlens.model, etlens.schema):
            for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
                try:
                    importlib.import_module(m.name)
                except ImportError:     # a module needing an optional extra (torch): not one a reader needs
                    pass
    from etlens.errors import EtlensError
    from tests.robustness import _harness as H

    exercise = exercise_factory()
    work = tempfile.mkdtemp(prefix=f"etlens-fuzz-{kind}-")
    kdir = out / kind
    (kdir / "seeds").mkdir(parents=True, exist_ok=True)
    (kdir / "corpus").mkdir(parents=True, exist_ok=True)
    (kdir / "failures").mkdir(parents=True, exist_ok=True)
    seeds = seeds_fn(extra)
    for data in seeds:
        (kdir / "seeds" / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)
        try:
            exercise(data, work)        # untimed: first imports are not a reader's hang
        except Exception:  # noqa: BLE001 - a seed that fails is reported by the fuzz loop itself
            pass
    if "torch" in sys.modules:      # debug tensors are decoded with torch: one thread (the machine is shared)
        sys.modules["torch"].set_num_threads(1)
    hot = {hashlib.sha1(d).digest(): H.flatbuffer_hot_positions(d) for d in seeds} if style == "flatbuffer" else {}
    hot_all = sorted({p for v in hot.values() for p in v})

    # the memory bound: 1 GB of address space above what the process has now
    with open("/proc/self/statm") as f:
        vsz = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (vsz + MEMORY_BYTES, resource.RLIM_INFINITY))

    seen: set[str] = set()
    counts = {"execs": 0, "results": 0, "etlens_errors": 0, "failures": 0}

    def record(data: bytes, detail: str) -> None:
        counts["failures"] += 1
        sig = _signature(detail) if "Traceback" in detail else detail.split(":")[0]
        if sig in seen:
            return
        seen.add(sig)
        name = hashlib.sha1(sig.encode()).hexdigest()[:12]
        (kdir / "failures" / f"{name}{ext}").write_bytes(data)
        (kdir / "failures" / f"{name}.txt").write_text(f"{sig}\n\n{detail}")
        print(f"FAILURE {kind}: {sig}", file=sys.stderr, flush=True)

    def one_input(data: bytes) -> None:
        counts["execs"] += 1
        fn = lambda: exercise(data, work)  # noqa: E731
        o = H._attempt(fn, TIME_LIMIT_S)
        if o.failure and o.failure.startswith("Timeout"):
            o = H._attempt(fn, TIME_LIMIT_S)        # a loaded machine gets one retry
        if o.failure and o.failure.startswith("Timeout") and "wall time" in o.failure:
            # the wall-clock backstop fired: on a machine this busy that can be the machine, not the reader;
            # a hang is more than TIME_LIMIT_S of the reader's own CPU time, so measure that without a wall limit
            again = H._attempt(fn, 20 * TIME_LIMIT_S)
            if not (again.failure or "").startswith("Timeout") and again.elapsed <= TIME_LIMIT_S:
                o = again
        if o.ok:
            counts["results"] += 1
        elif o.error:
            counts["etlens_errors"] += 1
        if o.failure:
            record(data, o.failure)
        if counts["execs"] % 200 == 0:      # libFuzzer exits without running atexit: keep the file current
            (kdir / "counts.json").write_text(json.dumps(counts))

    rng = random.Random(seed)

    def mutator(data: bytes, max_size: int, s: int) -> bytes:
        rng.seed(s)
        if not data or rng.random() < 0.5:
            return atheris.Mutate(data, max_size)
        try:
            if style == "zip":
                new = H.mutate_zip(rng, data)
            elif style == "json":
                new = H.mutate_json_text(rng, data)
            elif style == "flatbuffer":
                positions = hot.get(hashlib.sha1(data).digest()) or [p for p in hot_all if p < len(data)]
                new = H.apply_ops(data, H.random_ops(rng, len(data), positions))
            else:
                new = H.apply_ops(data, H.random_ops(rng, len(data), []))
        except Exception:  # noqa: BLE001 - an input the structured mutator cannot parse: bytes then
            return atheris.Mutate(data, max_size)
        return new[:max_size]

    max_len = max([len(d) for d in seeds] + [4096]) * 2
    args = [sys.argv[0], str(kdir / "corpus"), str(kdir / "seeds"), f"-max_total_time={int(seconds)}",
            f"-max_len={max_len}", "-timeout=0", "-rss_limit_mb=0", "-print_final_stats=1",
            f"-artifact_prefix={kdir / 'failures'}/native-", f"-seed={seed}", "-print_pcs=0"]
    import atexit

    atexit.register(lambda: (kdir / "counts.json").write_text(json.dumps(counts)))
    atheris.Setup(args, one_input, custom_mutator=mutator)
    try:
        atheris.Fuzz()
    except SystemExit:
        pass
    (kdir / "counts.json").write_text(json.dumps(counts))
    return 0
    _ = EtlensError  # noqa: F841 - imported under instrumentation


# -- the parent: one child per format, restarted after a native crash --------------------------------------
_STAT = re.compile(r"^#(\d+)\s+(INITED|DONE|NEW|REDUCE|pulse).*?cov: (\d+) ft: (\d+) corp: (\d+)")


def run_format(kind: str, seconds: float, out: Path, extra: str | None, seed: int) -> dict:
    t0 = time.monotonic()
    fig = {"format": kind, "execs": 0, "cov_start": None, "cov_end": 0, "ft_end": 0, "corpus_added": 0,
           "native_crashes": 0, "restarts": 0}
    log = (out / f"{kind}.log").open("a")
    while True:
        left = seconds - (time.monotonic() - t0)
        if left < 5:
            break
        cmd = [sys.executable, __file__, "--child", kind, "--seconds", str(int(left)), "--out", str(out),
               "--seed", str(seed + fig["restarts"])] + (["--extra", extra] if extra else [])
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        log.write(proc.stdout)
        log.flush()
        executed = None
        for line in proc.stdout.splitlines():
            m = _STAT.match(line)
            if m:
                if m.group(2) == "INITED" and fig["cov_start"] is None:
                    fig["cov_start"] = int(m.group(3))
                fig["cov_end"] = max(fig["cov_end"], int(m.group(3)))
                fig["ft_end"] = max(fig["ft_end"], int(m.group(4)))
            if line.startswith("stat::new_units_added:"):
                fig["corpus_added"] += int(line.rsplit(":", 1)[1])
            if line.startswith("stat::number_of_executed_units:"):
                executed = int(line.rsplit(":", 1)[1])
        counts = json.loads((out / kind / "counts.json").read_text()) if (out / kind / "counts.json").exists() \
            else {}
        fig["execs"] += counts.get("execs", 0) if executed is None else executed
        for k in ("results", "etlens_errors", "failures"):
            fig[k] = fig.get(k, 0) + counts.get(k, 0)
        (out / kind / "counts.json").unlink(missing_ok=True)
        if proc.returncode == 0:
            break
        if "INITED" not in proc.stdout:       # the child did not get to fuzzing (an import error): no retry
            fig["start_error"] = proc.stdout.strip().splitlines()[-1][:300] if proc.stdout.strip() else "?"
            break
        fig["native_crashes"] += 1
        fig["restarts"] += 1
    fig["distinct_failures"] = sorted(p.read_text().splitlines()[0]
                                      for p in (out / kind / "failures").glob("*.txt"))
    fig["seconds"] = round(time.monotonic() - t0)
    log.close()
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("formats", nargs="*", default=list(DEFAULT))
    ap.add_argument("--seconds", type=float, default=600, help="fuzzing time per format (default 600)")
    ap.add_argument("--out", default="fuzz-out", help="corpus, failures, logs and summary.json go here")
    ap.add_argument("--extra", help="a directory of more real artifacts for the seeds (e.g. .cache/fixtures)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--list", action="store_true", help="list the formats and their seed counts")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    out = Path(a.out).resolve()
    if a.child:
        return child(a.child, a.seconds, out, a.extra, a.seed)
    if a.list:
        for k, (seeds, *_rest) in FORMATS.items():
            print(f"{k:9s} {len(seeds(a.extra))} seeds")
        return 0
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("fuzz_readers needs atheris: pip install -c constraints.txt atheris (the dev extra has it)",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    bad = 0
    for kind in a.formats:
        if kind not in FORMATS:
            ap.error(f"unknown format {kind!r}; choose from {', '.join(FORMATS)}")
        if not FORMATS[kind][0](a.extra):
            print(f"{kind:9s} no seeds (real files of this format; see --extra): not run", flush=True)
            continue
        fig = run_format(kind, a.seconds, out, a.extra, a.seed)
        summary[kind] = fig
        summary_path.write_text(json.dumps(summary, indent=1, sort_keys=True))
        bad += len(fig["distinct_failures"])
        print(f"{kind:9s} {fig['execs']:7d} execs in {fig['seconds']} s  cov {fig['cov_start']} -> {fig['cov_end']}"
              f"  +{fig['corpus_added']} inputs for new coverage  {fig.get('etlens_errors', 0)} EtlensError"
              f"  {fig.get('failures', 0)} failures ({len(fig['distinct_failures'])} distinct)"
              f"  {fig['native_crashes']} native crashes", flush=True)
        for sig in fig["distinct_failures"]:
            print(f"    {sig}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The llm-diff corpus (``tests/llm_diff/build.py``), built once per generator source into the fixture cache.

``llm_diff_fp32`` (the fast tier) exports nothing of its own: its ``fp32`` is the LLM corpus's small
``fp32_dynamic`` build (tests/llm, 2 layers, built for the first tier anyway) with faults planted in it and a
16-token prompt. ``llm_diff_corpus`` (the heavy tier) is four 4-layer builds of one checkpoint: ``fp32`` and
``fp32_static`` are the phase corpus's two exports (tests/llm/build_phases.py: the same checkpoint and flags;
its dynamic one is built for the first tier anyway), ``q8`` (8da4w, minutes) and ``fp32_nokv`` are built by
build.py, in two directories at once; ``q8_fault0`` is fault seed 0 planted in the q8 build. Both are
session-scoped and cached in ``$ETLENS_FIXTURE_CACHE`` (``llm_diff-<hash of build.py, build_phases.py,
export_llama.py and the case names>/``; the planted fp32 faults and the prompt beside the phase corpus's
dynamic build, in ``llm_diff_planted/``).
Each case is a ``SimpleNamespace`` with absolute paths (``pte``, ``etrecord``, ``checkpoint``,
``params_json``, ``dir``) and the manifest entry (``fault``, ``quantization``, ``dynamic_shape`` ...);
``fp32_fault0`` .. ``fp32_fault9`` are the fp32 build with fault seed N planted in the ``.pte``
(:mod:`tests.llm_diff.plant`, milliseconds each, cached next to the corpus);
``tokens`` is the prompt file (64 tokens; 16 for the small build), ``n_tokens`` its length, ``n_layers`` the
build's, ``max_seq_len`` the positions it holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once
from tests.llm_diff.build import PARAMS, fault_of
from tests.llm_diff.plant import planted_pte, planted_q8_pte

BUILD = Path(__file__).resolve().parent / "build.py"
EXPORT_LLAMA = BUILD.parent.parent / "llm" / "export_llama.py"  # what build.py shares with tests/llm's builds
PHASES = BUILD.parent.parent / "llm" / "build_phases.py"  # the model (params, checkpoint seed) and two builds
PATH_KEYS = ("pte", "etrecord", "checkpoint", "params_json")
PLANTED_SEEDS = 10


def _load(out: Path, cases: dict) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    for name, entry in manifest.items():
        ns = SimpleNamespace(name=name, dir=str(out / name), **entry)
        for k in PATH_KEYS:
            setattr(ns, k, str(out / entry[k]))
        cases[name] = ns


def _from_phases(case: str, phases_dir: Path) -> SimpleNamespace:
    from tests.llm_diff.build import FROM_PHASES, entry

    mode = FROM_PHASES[case]
    ns = SimpleNamespace(name=case, dir=str(phases_dir / mode), **entry(case, mode + "/"))
    for k in PATH_KEYS:
        setattr(ns, k, str(phases_dir / getattr(ns, k)))
    return ns


def _corpus() -> SimpleNamespace:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the llm-diff corpus")
    from concurrent.futures import ThreadPoolExecutor

    from filelock import FileLock

    from tests.llm.conftest import llm_phases_dir
    from tests.llm_diff.build import CASES, FROM_PHASES, MAX_SEQ_LEN, write_tokens

    # four exports, two at a time: the 8da4w one (minutes) first; the phase corpus's dynamic one is usually
    # built already (the first tier reads it)
    own = [["q8"], [c for c in CASES if c not in FROM_PHASES and c != "q8"]]
    jobs = [lambda part=part: build_once("llm_diff", BUILD, (EXPORT_LLAMA, PHASES), args=tuple(part)) for part in own]
    jobs += [lambda mode=mode: llm_phases_dir(mode) for mode in FROM_PHASES.values()]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(job) for job in jobs]
        dirs = [f.result() for f in futures]
    cases: dict = {}
    for d in dirs[:len(own)]:
        _load(d, cases)
    phases = {mode: d for mode, d in zip(FROM_PHASES.values(), dirs[len(own):])}
    for case, mode in FROM_PHASES.items():
        cases[case] = _from_phases(case, phases[mode])
    # fp32 planted faults of seeds 0..9: the fp32 build with one weight scaled in the .pte itself
    # (tests/llm_diff/plant.py: byte for byte what export_llama makes from the disturbed checkpoint), and the
    # prompt, beside the fp32 build, under a lock: two test workers ask for the same planted files at once
    base = cases["fp32"]
    out = phases["dynamic"] / "llm_diff_planted"
    out.mkdir(exist_ok=True)
    with FileLock(str(out / ".plant.lock")):
        if not (out / "tokens64.txt").exists():
            write_tokens(str(out))
        for seed in range(PLANTED_SEEDS):
            d = out / f"fp32_fault{seed}"
            if not (d / "model.pte").exists():
                planted_pte(base.dir, fault_of(seed), str(d))
    # the 8da4w fault of seed 0, planted in the q8 build (its scales doubled: plant.py)
    q8 = cases["q8"]
    d = Path(q8.dir).parent / "planted" / "q8_fault0"
    with FileLock(str(Path(q8.dir).parent / ".plant.lock")):
        if not (d / "model.pte").exists():
            planted_q8_pte(q8.dir, fault_of(0), str(d))
    cases["q8_fault0"] = SimpleNamespace(**{**vars(q8), "name": "q8_fault0", "dir": str(d),
                                            "pte": str(d / "model.pte"), "etrecord": str(d / "etrecord.bin"),
                                            "fault": {"seed": 0, **fault_of(0)}, "planted": "in the .pte"})
    for seed in range(PLANTED_SEEDS):
        name = f"fp32_fault{seed}"
        d = out / name
        cases[name] = SimpleNamespace(**{**vars(base), "name": name, "dir": str(d), "pte": str(d / "model.pte"),
                                         "etrecord": str(d / "etrecord.bin"), "fault": {"seed": seed, **fault_of(seed)},
                                         "planted": "in the .pte"})
    return SimpleNamespace(cases=cases, tokens=str(out / "tokens64.txt"), dir=str(out), n_layers=PARAMS["n_layers"],
                           n_tokens=64, max_seq_len=MAX_SEQ_LEN)


#: the fast tier's prompt on the small build: 16 tokens, and 16 generated fill its 32 positions
SMALL_TOKENS = 16


def _small() -> SimpleNamespace:
    """The LLM corpus's ``fp32_dynamic`` build (tests/llm: 2 layers, 32 positions, the same export flags as
    ``fp32`` here, built for the first tier anyway) with planted faults and a 16-token prompt."""
    import random

    from filelock import FileLock

    from tests.llm.conftest import _load_llm, llm_corpus_dir

    out = llm_corpus_dir("fp32_dynamic")
    base = _load_llm(out)["fp32_dynamic"]
    params = json.loads((Path(base.dir) / "params.json").read_text())
    n_layers = params["n_layers"]
    small = out / "llm_diff_small"
    tokens = small / f"tokens{SMALL_TOKENS}.txt"
    with FileLock(str(out / ".llm_diff_small.lock")):
        if not tokens.exists():
            small.mkdir(exist_ok=True)
            rng = random.Random(SMALL_TOKENS)
            tokens.write_text(" ".join(str(rng.randrange(1, params["vocab_size"])) for _ in range(SMALL_TOKENS)) + "\n")
        for seed in range(PLANTED_SEEDS):
            d = small / f"fp32_fault{seed}"
            if not (d / "model.pte").exists():
                planted_pte(base.dir, fault_of(seed, n_layers), str(d))
    fp32 = SimpleNamespace(name="fp32", dir=base.dir, pte=base.pte, etrecord=base.etrecord,
                           checkpoint=str(Path(base.dir) / "checkpoint.pth"),
                           params_json=str(Path(base.dir) / "params.json"), params=params, fault=None)
    cases = {"fp32": fp32}
    for seed in range(PLANTED_SEEDS):
        d = small / f"fp32_fault{seed}"
        cases[f"fp32_fault{seed}"] = SimpleNamespace(**{
            **vars(fp32), "name": f"fp32_fault{seed}", "dir": str(d), "pte": str(d / "model.pte"),
            "etrecord": str(d / "etrecord.bin"), "fault": {"seed": seed, **fault_of(seed, n_layers)},
            "planted": "in the .pte"})
    return SimpleNamespace(cases=cases, tokens=str(tokens), dir=str(small), n_layers=n_layers,
                           n_tokens=SMALL_TOKENS, max_seq_len=base.max_seq_len)


@pytest.fixture(scope="session")
def llm_diff_fp32() -> SimpleNamespace:
    """The fast tier's corpus: the LLM corpus's small fp32 build as ``fp32`` (2 layers, a 16-token prompt) and
    its planted faults ``fp32_fault0..9`` (no export of its own: the first tier builds that one anyway)."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the llm-diff corpus")
    return _small()


@pytest.fixture(scope="session")
def llm_diff_corpus() -> SimpleNamespace:
    """The whole corpus: the 4-layer fp32, static, no-KV, 8da4w and 8da4w-fault builds (the heavy tier)."""
    return _corpus()

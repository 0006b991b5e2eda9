"""The llm-diff corpus (``tests/llm_diff/build.py``), built once per generator source into the fixture cache.

``llm_diff_fp32`` (the fast tier) builds the ``fp32`` case alone (one export, ~95 CPU-s);
``llm_diff_corpus`` (the heavy tier) adds the other cases, built as two more directories at once (ExecuTorch's
``export_llama`` on seeded 4-layer checkpoints; 10-30 minutes on 2 busy cores, the 8da4w exports are the slow
part). Both are session-scoped and cached in ``$ETLENS_FIXTURE_CACHE/llm_diff-<hash of build.py +
export_llama.py + the case names>/``.
Each case is a ``SimpleNamespace`` with absolute paths (``pte``, ``etrecord``, ``checkpoint``,
``params_json``, ``dir``) and the manifest entry (``fault``, ``quantization``, ``dynamic_shape`` ...);
``fp32_fault0`` .. ``fp32_fault9`` are the fp32 build with fault seed N planted in the ``.pte``
(:mod:`tests.llm_diff.plant`, milliseconds each, cached next to the corpus);
``tokens`` is the 64-token prompt file.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once
from tests.llm_diff.build import fault_of
from tests.llm_diff.plant import planted_pte

BUILD = Path(__file__).resolve().parent / "build.py"
EXPORT_LLAMA = BUILD.parent.parent / "llm" / "export_llama.py"  # what build.py shares with tests/llm's builds
PATH_KEYS = ("pte", "etrecord", "checkpoint", "params_json")
PLANTED_SEEDS = 10


#: the fp32 build (every planted fp32 fault is made from it in milliseconds): the fast tier's corpus
FAST_CASES = ("fp32",)


def _load(out: Path, cases: dict) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    for name, entry in manifest.items():
        ns = SimpleNamespace(name=name, dir=str(out / name), **entry)
        for k in PATH_KEYS:
            setattr(ns, k, str(out / entry[k]))
        cases[name] = ns


def _corpus(heavy: bool) -> SimpleNamespace:
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the llm-diff corpus")
    from tests.llm_diff.build import CASES

    out = build_once("llm_diff", BUILD, (EXPORT_LLAMA,), args=FAST_CASES)
    cases: dict = {}
    _load(out, cases)
    if heavy:
        # the other exports in two directories built at once (two export_llama children: the 8da4w ones take
        # minutes each, and one after another they were the heavy tier's longest chain)
        from concurrent.futures import ThreadPoolExecutor

        rest = [c for c in CASES if c not in FAST_CASES]
        with ThreadPoolExecutor(2) as pool:
            dirs = list(pool.map(lambda part: build_once("llm_diff", BUILD, (EXPORT_LLAMA,), args=tuple(part)),
                                 (rest[0::2], rest[1::2])))
        for d in dirs:
            _load(d, cases)
    # fp32 planted faults of seeds 0..9: the fp32 build with one weight scaled in the .pte itself
    # (tests/llm_diff/plant.py: byte for byte what export_llama makes from the disturbed checkpoint)
    # under the corpus's lock: two test workers ask for the same planted files at once
    from filelock import FileLock

    base = cases["fp32"]
    with FileLock(str(out / ".plant.lock")):
        for seed in range(PLANTED_SEEDS):
            d = out / "planted" / f"fp32_fault{seed}"
            if not (d / "model.pte").exists():
                planted_pte(base.dir, fault_of(seed), str(d))
    for seed in range(PLANTED_SEEDS):
        name = f"fp32_fault{seed}"
        d = out / "planted" / name
        cases[name] = SimpleNamespace(**{**vars(base), "name": name, "dir": str(d), "pte": str(d / "model.pte"),
                                         "etrecord": str(d / "etrecord.bin"), "fault": {"seed": seed, **fault_of(seed)},
                                         "planted": "in the .pte"})
    return SimpleNamespace(cases=cases, tokens=str(out / "tokens64.txt"), dir=str(out))


@pytest.fixture(scope="session")
def llm_diff_fp32() -> SimpleNamespace:
    """The fast tier's part of the corpus: ``fp32`` and its planted faults ``fp32_fault0..9`` (one export)."""
    return _corpus(heavy=False)


@pytest.fixture(scope="session")
def llm_diff_corpus() -> SimpleNamespace:
    """The whole corpus: the fast part plus the static, no-KV, 8da4w and 8da4w-fault builds (the heavy tier)."""
    return _corpus(heavy=True)

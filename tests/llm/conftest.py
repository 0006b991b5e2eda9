"""The LLM corpora, each case built once per generator source into the fixture cache.

``llm_corpus`` (``tests/llm/build.py``: ExecuTorch's own ``export_llama`` plus the real runtime) and
``llm_phases`` (``tests/llm/build_phases.py``: timing-only dumps + run logs, one export per shape mode) are
session-scoped mappings that build a case (a phase *mode*) the first time a test reads it, into
``$ETLENS_FIXTURE_CACHE/llm-<hash of the script, export_llama.py and the case>/`` under a file lock;
later test runs reuse it while the sources are unchanged. The first tier reads :data:`FAST_CASES` and
:data:`FAST_MODES` only (one export each, ~1 minute on 2 cores); tests over the other cases are marked
``slow`` by :func:`case_params` (the heavy tier: the static-shape and 8da4w exports).

Each ``llm_corpus`` case is a ``SimpleNamespace`` with absolute paths (``pte``, ``etrecord``, ``etdump``,
``debug_buffer``, ``etdump_profile``, ``dir``) and the manifest entry (``calls``, ``params``,
``dynamic_shape``, ``quantization``, ``max_seq_len`` ...).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once
from tests.llm.build import CASES as LLM_CASES
from tests.llm.build_phases import CASES as PHASE_CASES

BUILD = Path(__file__).resolve().parent / "build.py"
PHASES_BUILD = Path(__file__).resolve().parent / "build_phases.py"
#: what the build scripts share (tests/llm_diff/build.py too): part of each corpus's cache key
EXPORT_LLAMA = Path(__file__).resolve().parent / "export_llama.py"
PATH_KEYS = ("pte", "etrecord", "etdump", "debug_buffer", "etdump_profile")

#: the LLM corpus case the first tier builds (one dynamic-shape fp32 export)
FAST_CASES = ("fp32_dynamic",)
#: the phase corpus mode the first tier builds
FAST_MODES = ("dynamic",)


def case_params(names: Any, fast: tuple[str, ...] = FAST_CASES) -> list[Any]:
    """``names`` as ``parametrize`` values: a name whose case (or ``mode/…`` whose mode) is not in ``fast`` is
    marked ``slow`` (the heavy tier builds it)."""
    return [n if n.split("/")[0] in fast else pytest.param(n, marks=pytest.mark.slow) for n in names]


class _Lazy(Mapping):
    """A read-only ``{name: case}`` whose groups are built (``build_once``) the first time one is read."""

    def __init__(self, names: list[str], group: Any, load: Any) -> None:
        self._names, self._group, self._load = names, group, load
        self._cases: dict[str, SimpleNamespace] = {}

    def __getitem__(self, name: str) -> SimpleNamespace:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._cases:
            self._cases.update(self._load(self._group(name)))
        return self._cases[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def llm_corpus_dir(case: str = FAST_CASES[0]) -> Path:
    """Build (or reuse) one case of the corpus and return its directory (holds ``manifest.json``)."""
    return build_once("llm", BUILD, (EXPORT_LLAMA,), args=(case,))


def _load_llm(out: Path) -> dict[str, SimpleNamespace]:
    cases = {}
    for name, entry in json.loads((out / "manifest.json").read_text()).items():
        ns = SimpleNamespace(name=name, dir=str(out / name), **entry)
        for k in PATH_KEYS:
            setattr(ns, k, str(out / entry[k]))
        cases[name] = ns
    return cases


@pytest.fixture(scope="session")
def llm_corpus() -> Mapping[str, SimpleNamespace]:
    """``{case: namespace}`` of the LLM corpus (see the module docstring), each case built when first read;
    skipped without ExecuTorch."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the LLM corpus")
    return _Lazy(list(LLM_CASES), llm_corpus_dir, _load_llm)


def llm_phases_dir(mode: str = FAST_MODES[0]) -> Path:
    """Build (or reuse) one shape mode of the phase corpus (``tests/llm/build_phases.py``)."""
    return build_once("llm-phases", PHASES_BUILD, (EXPORT_LLAMA,), args=(mode,))


def _load_phases(out: Path) -> dict[str, SimpleNamespace]:
    cases = {}
    for mode, entry in json.loads((out / "manifest.json").read_text()).items():
        for name, case in entry["cases"].items():
            cases[f"{mode}/{name}"] = SimpleNamespace(
                name=f"{mode}/{name}", mode=mode, dynamic_shape=entry["dynamic_shape"], sessions=case["sessions"],
                calls=case["calls"], etdump=str(out / case["etdump"]), etrecord=str(out / entry["etrecord"]),
                pte=str(out / entry["pte"]))
    return cases


@pytest.fixture(scope="session")
def llm_phases() -> Mapping[str, SimpleNamespace]:
    """``{"dynamic/p8_g120": namespace, ...}``: every timing-only dump of the phase corpus with absolute paths
    (``etdump``, ``etrecord``, ``pte``), its ``mode``, ``dynamic_shape``, ``sessions`` ([prompt, decode] pairs)
    and ``calls`` (the run log), a mode built when one of its dumps is first read; skipped without ExecuTorch."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the phase corpus")
    names = [f"{mode}/{c['name']}" for mode, cases in PHASE_CASES.items() for c in cases]
    return _Lazy(names, lambda name: llm_phases_dir(name.split("/")[0]), _load_phases)

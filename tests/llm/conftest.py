"""The LLM corpus (``tests/llm/build.py``), built once per generator source into the fixture cache.

``llm_corpus`` is session-scoped: the first test that asks for it runs the generator (ExecuTorch's
own ``export_llama`` plus the real runtime, ~2-3 minutes on 2 cores) into
``$ETLENS_FIXTURE_CACHE/llm-<hash of build.py and export_llama.py>/`` under a file lock; later test runs reuse it
while they are unchanged. Each case is a ``SimpleNamespace`` with absolute paths (``pte``,
``etrecord``, ``etdump``, ``debug_buffer``, ``etdump_profile``, ``dir``) and the manifest entry
(``calls``, ``params``, ``dynamic_shape``, ``quantization``, ``max_seq_len`` ...).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import HAS_EXECUTORCH, build_once

BUILD = Path(__file__).resolve().parent / "build.py"
PHASES_BUILD = Path(__file__).resolve().parent / "build_phases.py"
#: what the build scripts share (tests/llm_diff/build.py too): part of each corpus's cache key
EXPORT_LLAMA = Path(__file__).resolve().parent / "export_llama.py"
PATH_KEYS = ("pte", "etrecord", "etdump", "debug_buffer", "etdump_profile")


def llm_corpus_dir() -> Path:
    """Build (or reuse) the corpus and return its directory (holds ``manifest.json``)."""
    return build_once("llm", BUILD, (EXPORT_LLAMA,))


@pytest.fixture(scope="session")
def llm_corpus() -> dict[str, SimpleNamespace]:
    """``{case: namespace}`` of the LLM corpus (see the module docstring); skipped without ExecuTorch."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the LLM corpus")
    out = llm_corpus_dir()
    manifest = json.loads((out / "manifest.json").read_text())
    cases = {}
    for name, entry in manifest.items():
        ns = SimpleNamespace(name=name, dir=str(out / name), **entry)
        for k in PATH_KEYS:
            setattr(ns, k, str(out / entry[k]))
        cases[name] = ns
    return cases


def llm_phases_dir() -> Path:
    """Build (or reuse) the phase corpus (``tests/llm/build_phases.py``: timing-only dumps + run logs)."""
    return build_once("llm-phases", PHASES_BUILD, (EXPORT_LLAMA,))


@pytest.fixture(scope="session")
def llm_phases() -> dict[str, SimpleNamespace]:
    """``{"dynamic/p8_g120": namespace, ...}``: every timing-only dump of the phase corpus with absolute paths
    (``etdump``, ``etrecord``, ``pte``), its ``mode``, ``dynamic_shape``, ``sessions`` ([prompt, decode] pairs)
    and ``calls`` (the run log); skipped without ExecuTorch."""
    if not HAS_EXECUTORCH:
        pytest.skip("needs the executorch extra to export and run the phase corpus")
    out = llm_phases_dir()
    manifest = json.loads((out / "manifest.json").read_text())
    cases = {}
    for mode, entry in manifest.items():
        for name, case in entry["cases"].items():
            cases[f"{mode}/{name}"] = SimpleNamespace(
                name=f"{mode}/{name}", mode=mode, dynamic_shape=entry["dynamic_shape"], sessions=case["sessions"],
                calls=case["calls"], etdump=str(out / case["etdump"]), etrecord=str(out / entry["etrecord"]),
                pte=str(out / entry["pte"]))
    return cases

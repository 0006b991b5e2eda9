"""README, docs, sources and tests speak of the product, not of how it was made.

History belongs in git. A line fails when it names a tracker number (``issue 15``, ``(#35)``), a
release train (``wave``), a task description (``brief``), the people or agents who did the work
(``helper``, ``judge``) or a work session (``other sessions`` sharing the machine, ``in this
session``). The product's own sessions stay allowed: a ``BuildSession`` (``the session's worker
child``, ``this session's export``), an LLM's generate sessions (``a later session whose prompt``,
``one value per session``), an ONNX ``InferenceSession``, a pytest session (``scope="session"``).
Code words for small functions are spelled ``function``/``utility``, so ``helper`` is never needed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (what it names, pattern) — matched case-insensitively, line by line
PROCESS_WORDS = [
    ("the tracker", r"\bissues?\s*#?\d+\b|\(#\d+\)|\bthe issue's\b|\bthe issue (measured|asks|says|wants)\b"),
    ("a release train", r"\bwaves?\b"),
    ("a task description", r"\bbriefs?\b"),
    ("who did the work", r"\bhelpers?\b|\bjudge\b"),
    ("a work session", r"\bother sessions\b|\b(in|of|during|for) this session\b(?!')|\bend of the session\b"
                       r"|\bsession judged\b|\bwork sessions?\b|\bsessions? of work\b|\bby a session\b"),
]
_RE = [(what, re.compile(p, re.IGNORECASE)) for what, p in PROCESS_WORDS]

#: text files read (binary data and screenshots are not)
SUFFIXES = {".md", ".py", ".js", ".html", ".css", ".txt", ".toml", ".ipynb", ".sh", ".cfg", ".yaml", ".yml"}
#: this file names the words it looks for
SELF = Path(__file__).resolve()


def _files() -> list[Path]:
    out = [ROOT / "README.md"]
    for folder in ("docs", "src", "tests"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and path.resolve() != SELF \
                    and "__pycache__" not in path.parts and ".cache" not in path.parts:
                out.append(path)
    return out


def _findings(lines: list[str], where: str) -> list[str]:
    found = []
    for i, line in enumerate(lines, 1):
        for what, rx in _RE:
            m = rx.search(line)
            if m:
                found.append(f"{where}:{i}: {m.group(0)!r} ({what}): {line.strip()[:140]}")
    return found


def test_no_process_words():
    found: list[str] = []
    files = _files()
    assert len(files) > 300
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        found += _findings(text.splitlines(), str(path.relative_to(ROOT)))
    assert not found, "words about how the project was made (say it about the product):\n" + "\n".join(found)


def test_patterns_catch_process_and_keep_product():
    process = ["New in this wave: llm-diff", "Report sections for issue 15: memory", "fleet ingestion (#32).",
               "issue #18: the union of passes", "the brief: <= 60 s", "another helper's tests running",
               "Shared helpers for the numerics tests", "Measured: the judge protocol", "the judge's machine",
               "shared with five other sessions, load 8-13", "No speed-up was made in this session (see",
               "It was stopped at the end of the session;", "filed by a session",
               "The issue measured 3.2-4.4x", "averaged 0.153 ms in the issue's example"]
    product = ["BuildSession(model, inputs)", "the session's worker child", "this session's export",
               "one value for every generate session, or one per session in order",
               "a later session whose prompt has 1-2 tokens", "onnxruntime.InferenceSession(path)",
               "@pytest.fixture(scope=\"session\")", "the verdict judges each op", "judged as measured",
               "the build judged: a .pte", "Fully Connected (NC, QS8) GEMM #2", "color: #222", "_HELPERS",
               "XnnpackBackend #0", "a wavelet", "issues a warning"]
    assert all(_findings([s], "x") for s in process), [s for s in process if not _findings([s], "x")]
    assert not any(_findings([s], "x") for s in product), [s for s in product if _findings([s], "x")]

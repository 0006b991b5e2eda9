"""Test-only start-up hook: ExecuTorch's own delegation info of the lowering a corpus build does.

The test session (tests/conftest.py) puts this directory first on the ``PYTHONPATH`` its processes hand to
their children and names a directory in ``ETLENS_CORPUS_DELEGATION_DIR`` (one per test process). Python
imports ``sitecustomize`` at start-up; this one only registers an import hook, so a child that never imports
ExecuTorch pays nothing. When ``executorch.exir`` is imported, ``to_edge_transform_and_lower`` is wrapped:
after a lowering with ``partitioner=`` (the report's one lowering; the pass tracer's edge-only view passes
none), if the test process asked for it by writing the path of a JSON file into ``<dir>/target``
(:func:`tests.corpus.build.build` does, around one corpus build), ExecuTorch's ``get_delegation_info`` on the
lowered program still in memory is written there. That is the reference
``test_delegation_equals_executorch_on_the_lowered_program`` holds etlens' answer from the files to — taken on
the very program the report's files come from, with no second export and lowering in the build.

The variable and the target file stay the same from one build to the next, so the worker child a test process
keeps warm (:mod:`etlens.builder.warm`) serves every corpus build of that process. The hook never raises into
the lowering: a failure is written to the target instead.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import sys


def _target() -> str | None:
    try:
        with open(os.path.join(os.environ["ETLENS_CORPUS_DELEGATION_DIR"], "target"), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _record(edge, out: str) -> None:
    try:
        from executorch.devtools.backend_debug import get_delegation_info

        info = get_delegation_info(edge.exported_program().graph_module)
        df = info.get_operator_delegation_dataframe()
        doc = {"summary": info.get_summary(),
               "counts": [info.num_delegated_subgraphs, info.num_delegated_nodes, info.num_non_delegated_nodes],
               "columns": list(df.columns), "rows": df.astype(object).values.tolist()}
    except Exception as exc:  # noqa: BLE001 - the test says what went wrong; the lowering goes on
        doc = {"error": f"{type(exc).__name__}: {exc}"}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, default=str)


def _wrap(exir) -> None:
    original = exir.to_edge_transform_and_lower

    def lowered(*args, **kwargs):
        edge = original(*args, **kwargs)
        out = _target() if "partitioner" in kwargs else None
        if out:
            _record(edge, out)
        return edge

    exir.to_edge_transform_and_lower = lowered


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``executorch.exir`` is found by the other finders, wraps it once loaded."""

    def find_spec(self, name, path, target=None):
        if name != "executorch.exir":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    _wrap(module)

                spec.loader.exec_module = exec_module
                return spec
        return None


if os.environ.get("ETLENS_CORPUS_DELEGATION_DIR"):
    sys.meta_path.insert(0, _WrapOnImport())

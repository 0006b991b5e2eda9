"""Test-only start-up hook for the worker child of a corpus build (``tests/corpus/build.py``).

``build.py`` puts this directory on the ``PYTHONPATH`` it hands to ``report_from_model``'s worker child
and names a file in ``ETLENS_CORPUS_DELEGATION_OUT``. Python imports ``sitecustomize`` at start-up, so
before any etlens code runs in the child, ``executorch.exir.to_edge_transform_and_lower`` is wrapped:
the lowering the report really does (the call with ``partitioner=``; the tracer's edge-only view
passes none) is followed by ExecuTorch's own ``get_delegation_info`` on the lowered program still in
memory, written as JSON. That is the reference ``test_delegation_equals_executorch_on_the_lowered_program``
holds etlens' answer from the files to — taken on the very program the report's files come from, with
no second export and lowering in the build.

Without the variable (any other process that inherits this path) the hook does nothing.
"""

from __future__ import annotations

import json
import os


def _install(out: str) -> None:
    import executorch.exir as exir

    original = exir.to_edge_transform_and_lower

    def lowered(*args, **kwargs):
        edge = original(*args, **kwargs)
        if "partitioner" not in kwargs:  # the tracer's edge-only view: no delegates to describe
            return edge
        from executorch.devtools.backend_debug import get_delegation_info

        info = get_delegation_info(edge.exported_program().graph_module)
        df = info.get_operator_delegation_dataframe()
        with open(out, "w") as f:
            json.dump({"summary": info.get_summary(),
                       "counts": [info.num_delegated_subgraphs, info.num_delegated_nodes,
                                  info.num_non_delegated_nodes],
                       "columns": list(df.columns), "rows": df.astype(object).values.tolist()}, f, default=str)
        return edge

    exir.to_edge_transform_and_lower = lowered


if os.environ.get("ETLENS_CORPUS_DELEGATION_OUT"):
    _install(os.environ["ETLENS_CORPUS_DELEGATION_OUT"])

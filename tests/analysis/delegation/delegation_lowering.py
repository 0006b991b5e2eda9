"""Shared lowering for the delegation tests: each demo case lowered in memory once per process.

``lowered(case)`` returns the ``EdgeProgramManager`` from ``to_edge_transform_and_lower`` with the
XNNPACK partitioner, *not* passed through ``to_executorch`` (which rewrites the edge program in
place: out-variants, ``alloc`` nodes). Cases and models are those ``tests/fixtures/generate.py``
builds the fixture ETRecords from, so names and structure agree with those files.
"""

from __future__ import annotations

XNN_CASES = ["mlp_xnnpack", "cnn_xnnpack", "mixed_xnnpack", "cnn_q8_xnnpack"]
_CACHE: dict[str, object] = {}


def lowered(case: str):
    if case not in _CACHE:
        import torch
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        from tests.fixtures.generate import CASES, quantize

        from etlens.demos import get_demo

        demo, quant, _delegate, _runs = CASES[case]
        model, inputs = get_demo(demo)
        if quant:
            model = quantize(model, inputs)
        ep = torch.export.export(model, inputs)
        _CACHE[case] = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    return _CACHE[case]

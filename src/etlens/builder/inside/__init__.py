"""Inside the delegate: which operator makes the numbers drift, with the real backend kernels.

ExecuTorch's runtime logs one output per delegate call, so for a model a backend takes whole the
device-side numeric gap is one row. This package lowers the model again with every exposable value
inside the delegates returned as an extra program output, runs it on the real backend kernels and
pairs each value with the float model's (end-to-end error) and, for int8, with the
quantize-dequantize-simulated graph's (kernel error alone). See docs/inside-delegates.md.

Example::

    from etlens.builder.inside import inside_delegates
    res = inside_delegates(model, inputs, backend="xnnpack", quantize=True, metric="SNR", threshold=20)
    print(res.to_text())
"""

from __future__ import annotations

from .engine import METRICS, inside_delegates
from .result import InsideResult

__all__ = ["inside_delegates", "InsideResult", "METRICS"]

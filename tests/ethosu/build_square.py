"""Build the square-feature-map CNN for ethos-u55-128 (``python build_square.py OUT``): C = H = W = 16.

Six int8 convolutions of 16 channels on 16x16 feature maps, so an NHWC tensor has the shape of its NCHW
reference and only the facts (the TOSA graph's transposes, the edge program's dim orders) can say how
to compare them. Written with :func:`tests.ethosu.build_corpus.compile_one` (pte, etrecord, sidecar,
the TOSA graph) into OUT, with ``manifest.json``.
"""

from __future__ import annotations

import json
import os
import sys

import torch
from torch import nn


class SquareCNN(nn.Module):
    """stem + five 3x3 convolutions, 16 channels each, ReLU between, 16x16 throughout."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(16, 16, 3, padding=1) for _ in range(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = torch.relu(conv(x))
        return x


def build_square():
    torch.manual_seed(0)
    return SquareCNN().eval(), (torch.randn(1, 16, 16, 16),)


def main(argv: list[str]) -> int:
    from tests.ethosu import models
    from tests.ethosu.build_corpus import compile_one

    out = argv[0]
    os.makedirs(out, exist_ok=True)
    models.MODELS["square_cnn"] = build_square
    files = compile_one("square_cnn", "ethos-u55-128", out)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"square_cnn@ethos-u55-128": files}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

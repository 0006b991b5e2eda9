"""Build .bpte files with ExecuTorch's own serializer (the reference writer) for the tests.

``python tests/memsize/make_bpte.py OUT_DIR`` writes ``good.bpte`` (expected outputs computed by
eager PyTorch), ``bad.bpte`` (one expected output of method ``forward`` case 1 shifted by 1.0) and
``two.pte`` / ``two_b.pte`` (two small programs for the diff tests).
"""

from __future__ import annotations

import os
import sys

import torch


class Small(torch.nn.Module):
    def __init__(self, relu: bool = True) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.relu = relu

    def forward(self, x):
        y = self.fc(x)
        return torch.relu(y) if self.relu else y * 2.0


def program(model, example):
    from executorch.exir import to_edge

    return to_edge(torch.export.export(model, example)).to_executorch()


def main(out: str) -> None:
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Small().eval()
    inputs = [(torch.randn(2, 8),) for _ in range(3)]
    et = program(model, inputs[0])
    for name, shift in (("good", 0.0), ("bad", 1.0)):
        cases = []
        for i, inp in enumerate(inputs):
            expected = model(*inp)
            if i == 1:
                expected = expected + shift
            cases.append(MethodTestCase(inputs=inp, expected_outputs=(expected,)))
        bp = BundledProgram(et, [MethodTestSuite(method_name="forward", test_cases=cases)])
        with open(os.path.join(out, f"{name}.bpte"), "wb") as f:
            f.write(serialize_from_bundled_program_to_flatbuffer(bp))
    with open(os.path.join(out, "two.pte"), "wb") as f:
        f.write(et.buffer)
    with open(os.path.join(out, "two_b.pte"), "wb") as f:
        f.write(program(Small(relu=False).eval(), inputs[0]).buffer)


if __name__ == "__main__":
    main(sys.argv[1])

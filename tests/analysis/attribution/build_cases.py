"""Build the attribution test programs (run as a script: ``python build_cases.py OUT_DIR CASE...``).

* ``one_per_delegate`` — the truth by construction: ``cumsum`` (which XNNPACK does not take)
  between every two operators, so each delegate holds exactly one ATen operator; every
  delegate-internal event must then be attributed to that delegate's operator.
* corpus cases ``<name>_fp32`` / ``<name>_int8`` (``tests/corpus/models.py``), for building the
  docs/attribution.md table by hand (the corpus tests read the corpus' own builds).

Each case is lowered with XNNPACK and run 3 times by :func:`etlens.builder.pipeline.build_and_run`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def one_per_delegate():
    import torch

    class OnePerDelegate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 2, 3, padding=1)
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):                             # x: (2, 2, 8, 8)
            x = self.conv(x)                              # delegate 0: convolution (+ layout transposes)
            x = torch.cumsum(x, 3)
            x = torch.sigmoid(x)                          # delegate 1: sigmoid
            x = torch.cumsum(x, 3)
            x = x * x                                     # delegate 2: mul (XNNPACK runs it as Square)
            x = torch.cumsum(x, 3)
            return self.fc(x)                             # delegate 3: linear

    torch.manual_seed(0)
    return OnePerDelegate().eval(), (torch.randn(2, 2, 8, 8),)

#: the one ATen operator each delegate of ``one_per_delegate`` holds, in delegate order
ONE_PER_DELEGATE_OPS = ["aten.convolution.default", "aten.sigmoid.default", "aten.mul.Tensor",
                        "aten.linear.default"]


def main(out: str, cases: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "src"))
    from etlens.builder.pipeline import build_and_run

    manifest_path = Path(out) / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for case in cases:
        if case == "one_per_delegate":
            model, inputs, quant = *one_per_delegate(), False
        else:
            from tests.corpus.models import build

            name, kind = case.rsplit("_", 1)
            model, inputs = build(name)
            quant = kind == "int8"
        d = Path(out) / case
        arts = build_and_run(model, inputs, str(d), name="m", quantize=quant, runs=3, debug_buffer_size=64 << 20)
        files = {"pte": arts.pte, "etrecord": arts.etrecord, "etdump": arts.etdump, "debug_buffer": arts.debug_buffer}
        manifest[case] = {k: str(Path(v).relative_to(out)) for k, v in files.items()}
        manifest_path.write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

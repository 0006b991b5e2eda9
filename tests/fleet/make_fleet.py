"""Build a small real fleet: one model in two builds (build ``n+1`` widens one layer), several real ETDumps each.

Run as a script (``python tests/fleet/make_fleet.py OUT``): it lowers the model with the real ExecuTorch
toolchain (portable kernels, so every operator is its own timed event with a debug handle), writes the
``.pte`` + ``.etrecord`` of each build, and runs each program :data:`DUMPS` times in the ExecuTorch runtime
(``RUNS`` runs per ETDump). ``OUT/manifest.json`` lists the files with their device/build metadata.

The regression is real: build ``n+1`` makes ``block`` (Linear -> ReLU -> Linear) :data:`WIDE` units wide
instead of :data:`NARROW`; its input and output shapes are unchanged, so only ``block``'s operators get slower.
"""

from __future__ import annotations

import json
import os
import sys

NARROW, WIDE = 32, 1024
RUNS = 10
#: ETDumps per build, and the device each one is labelled with
DEVICES = ["pixel7", "pixel7", "rpi5", "rpi5"]
DUMPS = len(DEVICES)


def make_model(width: int):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(64, 64)
            self.block = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, 64))
            self.out = nn.Linear(64, 16)

        def forward(self, x):
            return self.out(torch.relu(self.block(torch.relu(self.inp(x)))))

    torch.manual_seed(0)
    return Net().eval(), (torch.randn(32, 64),)


def build(out: str) -> dict:
    from etlens.builder.pipeline import build_and_run, run_with_etdump

    manifest: dict = {"builds": {}, "dumps": []}
    for build_name, width in (("n", NARROW), ("n+1", WIDE)):
        model, inputs = make_model(width)
        d = os.path.join(out, f"build_{width}")
        arts = build_and_run(model, inputs, d, name="net", backend="portable", runs=RUNS,
                             debug_buffer_size=1 << 26)
        manifest["builds"][build_name] = {"pte": arts.pte, "etrecord": arts.etrecord, "width": width}
        with open(arts.pte, "rb") as f:
            pte = f.read()
        for i, device in enumerate(DEVICES):
            path = os.path.join(d, f"{device}_{i}.etdp")
            if i == 0:
                os.replace(arts.etdump, path)   # the dump build_and_run wrote is the first one
            else:
                run_with_etdump(pte, inputs, RUNS, path, None)
            manifest["dumps"].append({"etdump": path, "device": device, "build": build_name,
                                      "etrecord": arts.etrecord, "pte": arts.pte})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    build(sys.argv[1])

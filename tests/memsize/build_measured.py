"""Programs whose memory the measured-memory tests load and run: one linear-heavy MLP four ways.

``python tests/memsize/build_measured.py OUT_DIR [WIDTH LAYERS]`` writes, from the same weights:

* ``mlp_xnnpack.pte``: fp32, every linear in the XNNPACK delegate (it packs the weights at init);
* ``mlp_portable.pte``: fp32, portable kernels only (the constants stay in the program);
* ``mlp_int8.pte``: int8 (pt2e, XNNPACK quantizer), XNNPACK;
* ``dyn_portable.pte``: a sequence model whose length is dynamic (1..MAX), portable kernels: the
  planner sizes every intermediate for the upper bound;
* ``ext/mlp_external.pte`` + ``ext/*.ptd``: the fp32 MLP on portable kernels with its constants in a
  ``.ptd`` data file (``external_constants=True``);

and ``manifest.json`` (name -> file, plus the widths used).
"""

from __future__ import annotations

import json
import os
import sys


def mlp(width: int, layers: int):
    import torch

    torch.manual_seed(0)
    mods: list = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods).eval(), (torch.randn(1, width),)


class SeqModel:  # built lazily so importing this file does not import torch
    @staticmethod
    def make(width: int, max_len: int):
        import torch

        class Seq(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.a = torch.nn.Linear(width, 4 * width)
                self.b = torch.nn.Linear(4 * width, width)

            def forward(self, x):
                h = torch.relu(self.a(x))
                return self.b(h) + x

        torch.manual_seed(0)
        return Seq().eval(), (torch.randn(1, max_len, width),)


def _save(et, out: str, name: str, done: dict) -> None:
    with open(os.path.join(out, name), "wb") as f:
        f.write(et.buffer)
    done[name.removesuffix(".pte")] = name
    print("built", name, flush=True)


def main(out: str, width: int = 512, layers: int = 4) -> None:
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from etlens.builder.pipeline import lower

    os.makedirs(out, exist_ok=True)
    done: dict = {"width": width, "layers": layers}
    model, inputs = mlp(width, layers)
    for name, parts in (("mlp_xnnpack.pte", [XnnpackPartitioner()]), ("mlp_portable.pte", [])):
        ep = torch.export.export(model, inputs)
        _save(to_edge_transform_and_lower(ep, partitioner=parts).to_executorch(), out, name, done)
    _, _, et = lower(model, inputs, backend="xnnpack", quant=True)
    _save(et, out, "mlp_int8.pte", done)
    max_len = 128
    seq, seq_inputs = SeqModel.make(width // 2, max_len)
    t = torch.export.Dim("t", min=2, max=max_len)
    ep = torch.export.export(seq, seq_inputs, dynamic_shapes=({1: t},))
    _save(to_edge_transform_and_lower(ep, partitioner=[]).to_executorch(), out, "dyn_portable.pte", done)
    done["dyn_max_len"] = max_len
    from executorch.exir import ExecutorchBackendConfig

    ext = os.path.join(out, "ext")
    os.makedirs(ext, exist_ok=True)
    ep = torch.export.export(model, inputs)
    et = to_edge_transform_and_lower(ep, partitioner=[]).to_executorch(ExecutorchBackendConfig(external_constants=True))
    _save(et, out, "ext/mlp_external.pte", done)
    et.write_tensor_data_to_file(ext)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(done, f)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(sys.argv[1], *(int(a) for a in sys.argv[2:4]))

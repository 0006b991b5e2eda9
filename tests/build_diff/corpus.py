"""Pairs of builds of one small model, each pair with one planted change (the build-diff corpus).

Every build is a directory holding what a device run leaves behind: ``model.pte``, ``model.etrecord``,
``model.etdp`` with ``model.debug.bin`` and ``model.r1.etdp`` .. (the runs in :data:`ROUNDS` rounds, see
there). The model is a conv stem and a stack of linear layers; the
builds differ from the base in exactly one way:

=============  ==================================================================  ===============
build          what differs from ``base``                                          cause expected
=============  ==================================================================  ===============
``rebuild``    nothing (the same model lowered and run again)                      none: "same"
``offload``    the partitioner leaves ``layers.1`` out (portable kernels run it)    placement
``naive``      the naive memory planning algorithm instead of greedy               memory_plan
``decomp``     ``layers.2``'s linear is decomposed (permute + addmm, still        decomposition
               delegated) instead of kept whole
``copies``     ``stem`` hands its output on in channels-last order (layout copies)  copies
``q8_keep``    against ``q8`` (all int8): ``layers.1`` kept in float                quantization
=============  ==================================================================  ===============

Usage: ``python tests/build_diff/corpus.py OUT [fast|slow|all]`` (``all`` by default; the slow
builds are diffed against the fast corpus's ``base``). Builds go through :mod:`etlens.builder.pipeline`
(export, lower in this process, run in the runtime's child); ``naive`` re-plans ``base``'s lowering.
"""

from __future__ import annotations

import os
import sys

#: build name -> (pair base, expected kind, planted module)
PAIRS = {
    "rebuild": ("base", None, None),
    "offload": ("base", "placement", "layers.1"),
    "naive": ("base", "memory_plan", ""),
    "decomp": ("base", "decomposition", "layers.2"),
    "copies": ("base", "copies", "stem"),
    "q8_keep": ("q8", "quantization", "layers.1"),
}
FAST = ("base", "naive", "rebuild", "offload")
SLOW = ("decomp", "copies", "q8", "q8_keep")
RUNS = 20
#: each build's runs are recorded in this many rounds, the builds of one batch taking turns round by round
#: (``model.etdp`` with the debug buffer, then ``model.r1.etdp`` ...): a burst of load on a shared machine then
#: falls on every build alike instead of on whichever was running, so "rebuild is the same as base" does not
#: rest on when each was recorded
ROUNDS = 4
HIDDEN = 256


def make_model(copies: bool = False):
    import torch
    from torch import nn

    class Stem(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.act = nn.ReLU()

        def forward(self, x):
            y = self.act(self.conv(x))
            if copies:  # the planted layout change: the stem's output leaves in channels-last order
                y = y.contiguous(memory_format=torch.channels_last)
            return y

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = Stem()
            self.proj = nn.Linear(8 * 8 * 8, HIDDEN)
            self.layers = nn.ModuleList([nn.Linear(HIDDEN, HIDDEN) for _ in range(3)])
            self.head = nn.Linear(HIDDEN, 10)

        def forward(self, x):
            x = torch.flatten(self.stem(x), 1)
            x = torch.relu(self.proj(x))
            for layer in self.layers:
                x = torch.relu(layer(x))
            return self.head(x)

    torch.manual_seed(0)
    model = Net().eval()
    for p in model.parameters():  # inference weights (an out-variant kernel refuses tensors that require grad)
        p.requires_grad_(False)
    return model, (torch.randn(16, 3, 8, 8),)


def _in_module(node, path: str) -> bool:
    stack = node.meta.get("nn_module_stack") or {}
    return any(v[0] == path or str(v[0]).endswith("." + path) for v in stack.values())


def _partitioner(exclude: str | None = None, decompose: str | None = None):
    """XNNPACK's partitioner, leaving module ``exclude`` out, or letting module ``decompose``'s ops decompose."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    class Planted(XnnpackPartitioner):
        def get_matched_nodes_from_configs(self, ep):
            groups = super().get_matched_nodes_from_configs(ep)
            if exclude is None:
                return groups
            out = [[n for n in g if not _in_module(n, exclude)] for g in groups]
            return [g for g in out if any(n.op == "call_function" for n in g)]

        def ops_to_not_decompose(self, ep):
            ops, keep = super().ops_to_not_decompose(ep)
            # an op left out of the delegate must decompose to what the portable kernels have
            whole = decompose or exclude
            if whole is None or keep is None:
                return ops, keep
            return ops, (lambda node: keep(node) and not _in_module(node, whole))

    return Planted()


def _quantized(model, inputs, keep_float: str | None):
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    from etlens.builder.pipeline import quantize_pt2e

    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    if keep_float is not None:
        q = XNNPACKQuantizer()
        q.set_global(get_symmetric_quantization_config())
        q.set_filter_function(lambda node: not _in_module(node, keep_float))
    return quantize_pt2e(model, inputs, quantizer=q, backend="xnnpack")


def build(name: str, out: str, lowered: dict | None = None) -> None:
    """Build ``name`` into ``out/name``; ``lowered`` caches lowerings (``naive`` re-plans ``base``'s)."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    from etlens.builder.pipeline import lower, run_with_etdump

    lowered = {} if lowered is None else lowered
    model, inputs = make_model(copies=name == "copies")
    quant = name in ("q8", "q8_keep")
    if name == "naive" and "base" in lowered:
        edge = lowered["base"]
    else:
        if quant:
            model = _quantized(model, inputs, "layers.1" if name == "q8_keep" else None)
        parts = None
        if name == "offload":
            parts = [_partitioner(exclude="layers.1")]
        elif name == "decomp":
            parts = [_partitioner(decompose="layers.2")]
        _ep, edge, et = lower(model, inputs, backend="xnnpack", partitioners=parts)
        lowered[name] = edge
    if name == "naive":
        from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, naive

        et = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
            memory_planning_algo=MemoryPlanningAlgorithmSuite(algo_list=[naive]))))
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.pte"), "wb") as f:
        f.write(et.buffer)
    record = et.get_etrecord()
    record.update_representative_inputs([tuple(inputs)])
    record.save(os.path.join(d, "model.etrecord"))
    run_with_etdump(et.buffer, inputs, RUNS // ROUNDS, os.path.join(d, "model.etdp"),
                    os.path.join(d, "model.debug.bin"), load_quantized_kernels=quant)


def more_rounds(out: str, names: tuple[str, ...]) -> None:
    """Rounds 1.. of every build in ``names``, taking turns (``model.r<k>.etdp``, no debug buffer)."""
    from etlens.builder.pipeline import run_with_etdump

    for k in range(1, ROUNDS):
        for name in names:
            d = os.path.join(out, name)
            _model, inputs = make_model(copies=name == "copies")
            with open(os.path.join(d, "model.pte"), "rb") as f:
                program = f.read()
            run_with_etdump(program, inputs, RUNS // ROUNDS, os.path.join(d, f"model.r{k}.etdp"), None,
                            load_quantized_kernels=name in ("q8", "q8_keep"))


def main(argv: list[str]) -> int:
    out = argv[0]
    which = argv[1] if len(argv) > 1 else "all"
    names = {"fast": FAST, "slow": SLOW, "all": FAST + SLOW}[which]
    lowered: dict = {}
    todo = tuple(n for n in names if not os.path.exists(os.path.join(out, n, f"model.r{ROUNDS - 1}.etdp")))
    for name in todo:
        build(name, out, lowered)
        print("built", name, flush=True)
    more_rounds(out, todo)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

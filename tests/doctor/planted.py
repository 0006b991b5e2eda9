"""Tiny models, each with one planted problem that has a known fix (and a clean one), for ``etlens doctor``.

Each function is a ``--model tests/doctor/planted.py:NAME`` target returning ``(model, inputs)``;
:data:`CASES` says what the doctor must find first (rule, module) and the model with the fix applied:

* ``portable_op`` — an ``AvgPool2d(ceil_mode=True)`` between two convolutions: the partitioner refuses
  ceil mode, so the pool runs on a portable kernel (fix: ``ceil_mode=False``, same output size here);
* ``fragmented`` — four blocks ``Linear -> cumsum``: the delegate has no cumsum, so it runs as five
  partitions (fix: the cumsum as a matmul with a triangular matrix of ones, which it takes);
* ``quant_culprit`` — six ``Linear`` + ReLU layers quantized to int8, ``layers.2`` with an activation
  outlier channel (fix: keep ``layers.2`` in float);
* ``dynamic_bound`` — a sequence model exported with ``Dim(max=1024)`` and run at 8 (artifacts path:
  :func:`build_dynamic`; fix: ``max=16``);
* ``layout_copy`` — ``to_cl`` turns the first convolution's output channels-last between two
  convolutions (fix: drop the memory-format change);
* ``clean`` — a small MLP the delegate takes whole: nothing above ``info``.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CASES", "portable_op", "fragmented", "quant_culprit", "layout_copy", "clean", "build_dynamic"]


class PoolNet(nn.Module):
    def __init__(self, ceil_mode: bool = True):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.AvgPool2d(2, stride=2, ceil_mode=ceil_mode)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x):
        return self.conv2(torch.relu(self.pool(torch.relu(self.conv1(x)))))


def portable_op(fixed: bool = False):
    torch.manual_seed(0)
    return PoolNet(ceil_mode=not fixed).eval(), (torch.randn(1, 8, 64, 64),)


class CumBlock(nn.Module):
    def __init__(self, width: int, fixed: bool):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.fixed = fixed
        self.register_buffer("tri", torch.triu(torch.ones(width, width)))

    def forward(self, x):
        y = self.fc(x)
        return y @ self.tri if self.fixed else torch.cumsum(y, dim=-1)


class Fragmented(nn.Module):
    def __init__(self, width: int = 64, fixed: bool = False):
        super().__init__()
        self.layers = nn.Sequential(*[CumBlock(width, fixed) for _ in range(4)])
        self.head = nn.Linear(width, 8)

    def forward(self, x):
        return self.head(self.layers(x) / 64.0)


def fragmented(fixed: bool = False):
    torch.manual_seed(0)
    return Fragmented(fixed=fixed).eval(), (torch.randn(64, 64),)


class MLP(nn.Module):
    def __init__(self, depth: int = 6, width: int = 32):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        with torch.no_grad():  # He init: the signal keeps its scale through the ReLU layers
            for layer in self.layers:
                layer.weight.normal_(0.0, (2.0 / width) ** 0.5)
                layer.bias.normal_(0.0, 0.1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def quant_culprit():
    """``layers.2`` emits one channel near 1000 that ``layers.3`` ignores (a "massive activation"): harmless
    in float, but the per-tensor int8 scale it sets crushes every other channel (as tests/fix/culprits.py)."""
    torch.manual_seed(0)
    model = MLP().eval()
    with torch.no_grad():
        model.layers[2].weight[5] *= 10.0
        model.layers[2].bias[5] = 1000.0
        model.layers[3].weight[:, 5] = 0.0
    return model, (torch.randn(16, 32, generator=torch.Generator().manual_seed(1000)),)


class ToChannelsLast(nn.Module):
    def forward(self, x):
        return x.contiguous(memory_format=torch.channels_last)


class LayoutNet(nn.Module):
    def __init__(self, fixed: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 16, 3, padding=1)
        self.to_cl = nn.Identity() if fixed else ToChannelsLast()
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x):
        return self.conv2(self.to_cl(self.conv1(x)))


def layout_copy(fixed: bool = False):
    torch.manual_seed(0)
    return LayoutNet(fixed=fixed).eval(), (torch.randn(1, 8, 64, 64),)


class Clean(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 64)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def clean():
    torch.manual_seed(0)
    return Clean().eval(), (torch.randn(8, 64),)


class SeqNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 64)
        self.out = nn.Linear(64, 32)

    def forward(self, x):
        return self.out(torch.relu(self.proj(x)))


def build_dynamic(out_dir: str, bound: int = 1024, used: int = 8, backend: str = "portable") -> object:
    """Lower :class:`SeqNet` with its sequence dim dynamic up to ``bound`` and run it at ``used``: the
    artifacts (``.pte``, ``.etrecord``, ``.etdp``) of a dynamic shape planned far above its use."""
    from etlens.builder.session import BuildSession

    torch.manual_seed(0)
    model, x = SeqNet().eval(), torch.randn(1, used, 32)
    session = BuildSession(model, (x,), name="dynamic", backend=backend)
    seq = torch.export.Dim("seq", min=1, max=bound)
    session._exported = torch.export.export(model, (x,), dynamic_shapes=({1: seq},))
    with session:
        return session.build(out_dir, runs=3)


#: case -> (rule the doctor must put first, module it must name, --model target, extra flags)
CASES = {
    "portable_op": ("portable-op", "pool", "portable_op", []),
    "fragmented": ("fragmented-delegate", "layers.0", "fragmented", []),
    "quant_culprit": ("quant-culprit", "layers.2", "quant_culprit", ["--quantize"]),
    "layout_copy": ("layout-copy", "to_cl", "layout_copy", []),
    "clean": (None, None, "clean", []),
}

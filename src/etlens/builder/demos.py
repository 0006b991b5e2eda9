"""Built-in demo models, defined in code (no downloads), used by the CLI, the report and the tests.

Each demo is a function returning ``(module, example_inputs)``; :data:`DEMOS` lists them::

    from etlens.demos import get_demo
    model, inputs = get_demo("cnn")
    model(*inputs)

* ``cnn`` — a small MobileNet-style CNN (depthwise-separable blocks, BatchNorm, ReLU6, pooling).
* ``transformer`` — one pre-norm transformer block (multi-head attention + MLP, GELU, LayerNorm).
* ``mixed`` — a model with ops the XNNPACK partitioner leaves on the CPU (``cumsum``, ``argmax``-free
  sort-based ops), so lowering yields a partially delegated program.
* ``mlp`` — a tiny two-layer MLP, the fastest to lower (used by fixtures and tests).
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import EtlensError

__all__ = ["DEMOS", "get_demo", "demo_names", "deep_mlp"]


def _torch():
    import torch

    return torch


def mlp() -> tuple[Any, tuple]:
    torch = _torch()
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(16, 32)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(32, 8)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x))) + 1.0

    torch.manual_seed(0)
    return MLP().eval(), (torch.randn(2, 16),)


def cnn() -> tuple[Any, tuple]:
    torch = _torch()
    nn = torch.nn

    class DepthwiseSeparable(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.depthwise = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
            self.bn1 = nn.BatchNorm2d(cin)
            self.pointwise = nn.Conv2d(cin, cout, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.act = nn.ReLU6()

        def forward(self, x):
            x = self.act(self.bn1(self.depthwise(x)))
            return self.act(self.bn2(self.pointwise(x)))

    class TinyMobileNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
            self.blocks = nn.Sequential(
                DepthwiseSeparable(8, 16, 1),
                DepthwiseSeparable(16, 32, 2),
                DepthwiseSeparable(32, 32, 1),
            )
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(32, 10)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            return self.classifier(torch.flatten(self.pool(x), 1))

    torch.manual_seed(0)
    model = TinyMobileNet().eval()
    return model, (torch.randn(1, 3, 32, 32),)


def transformer() -> tuple[Any, tuple]:
    torch = _torch()
    nn = torch.nn

    class Attention(nn.Module):
        def __init__(self, dim: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, dim * 3)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
            att = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
            att = att.softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self, dim: int = 32, heads: int = 4) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(dim)
            self.attn = Attention(dim, heads)
            self.ln2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Linear(dim * 4, dim))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    torch.manual_seed(0)
    return Block().eval(), (torch.randn(1, 8, 32),)


def mixed() -> tuple[Any, tuple]:
    torch = _torch()
    nn = torch.nn

    class Mixed(nn.Module):
        """Linear layers XNNPACK takes, around ops it does not (cumsum, sin), so the CPU keeps some."""

        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(16, 16)
            self.fc2 = nn.Linear(16, 16)
            self.head = nn.Linear(16, 4)

        def forward(self, x):
            x = torch.relu(self.fc1(x))
            x = torch.cumsum(x, dim=-1)
            x = torch.sin(self.fc2(x))
            return self.head(x)

    torch.manual_seed(0)
    return Mixed().eval(), (torch.randn(2, 16),)


def deep_mlp(layers: int = 1000, width: int = 8) -> tuple[Any, tuple]:
    """A ``layers``-deep stack of Linear+ReLU (benchmarks' 1000-layer model)."""
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(0)
    seq = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU())])
    return seq.eval(), (torch.randn(1, width),)


DEMOS: dict[str, tuple[Callable[[], tuple[Any, tuple]], str]] = {
    "cnn": (cnn, "small MobileNet-style CNN (depthwise-separable convs, BatchNorm, ReLU6)"),
    "transformer": (transformer, "one transformer block (attention + MLP, LayerNorm, GELU)"),
    "mixed": (mixed, "linear layers around ops XNNPACK leaves on the CPU (cumsum, sin)"),
    "mlp": (mlp, "tiny two-layer MLP (fastest to lower)"),
}


def demo_names() -> list[str]:
    return list(DEMOS)


def get_demo(name: str) -> tuple[Any, tuple]:
    """Build demo ``name``; raise :class:`EtlensError` listing the known demos otherwise."""
    try:
        factory = DEMOS[name][0]
    except KeyError:
        raise EtlensError(f"unknown demo model {name!r}; choose one of: {', '.join(DEMOS)}") from None
    return factory()

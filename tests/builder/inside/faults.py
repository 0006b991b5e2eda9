"""Deep int8 models with one injected fault: a layer whose int8 weights are ruined, float exact.

Each builder returns ``(module, example_inputs, faulty_module_path)``. The trick is the same in all
three: the layer before the faulty one always outputs 0 on one feature (its weights for that
feature are 0 and its bias is negative, then a ReLU), and the faulty layer carries a huge weight on
exactly that feature. In float the huge weight multiplies 0, so the model is exact; with
per-channel symmetric int8 weights, the huge weight sets every output channel's scale, so all
other weights of the layer round to 0 and its output collapses. Every other layer is ordinary, so
the first divergence must name the faulty layer.
"""

from __future__ import annotations

__all__ = ["mlp", "cnn", "transformer", "mlp_model", "BUILDERS"]

HUGE = 1e4


def _torch():
    import torch

    torch.manual_seed(0)
    return torch


def _silence(linear_or_conv, feature: int) -> None:
    """Make output ``feature`` of the layer always <= 0 (so 0 after a ReLU)."""
    w, b = linear_or_conv.weight, linear_or_conv.bias
    w.data[feature].zero_()
    b.data[feature] = -5.0


def mlp():
    """Eight Linear+ReLU blocks; block 4's ``fc`` is ruined in int8."""
    torch = _torch()
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.fc = nn.Linear(n, n)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class DeepMLP(nn.Module):
        def __init__(self, n: int = 32, depth: int = 8) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([Block(n) for _ in range(depth)])
            self.head = nn.Linear(n, 10)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    m = DeepMLP().eval()
    _silence(m.blocks[3].fc, 5)
    m.blocks[4].fc.weight.data[:, 5] = HUGE
    return m, (torch.randn(4, 32, generator=torch.Generator().manual_seed(1)),), "blocks.4.fc"


def cnn():
    """Six Conv+ReLU layers; conv 3 is ruined in int8."""
    torch = _torch()
    nn = torch.nn

    class DeepCNN(nn.Module):
        def __init__(self, c: int = 8, depth: int = 6) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, c, 3, padding=1)
            self.convs = nn.ModuleList([nn.Conv2d(c, c, 3, padding=1) for _ in range(depth)])
            self.head = nn.Linear(c, 10)

        def forward(self, x):
            x = torch.relu(self.stem(x))
            for conv in self.convs:
                x = torch.relu(conv(x))
            return self.head(x.mean(dim=(2, 3)))

    m = DeepCNN().eval()
    for conv in [m.stem, *m.convs]:  # keep activations O(1) through depth so no layer is bias-only
        torch.nn.init.kaiming_normal_(conv.weight, generator=torch.Generator().manual_seed(2))
        conv.bias.data.zero_()
    _silence(m.convs[2], 4)
    m.convs[3].weight.data[:, 4] = HUGE
    return m, (torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1)),), "convs.3"


def transformer():
    """Three pre-norm encoder blocks (attention + ReLU MLP); block 1's ``mlp.fc2`` is ruined in int8."""
    torch = _torch()
    nn = torch.nn

    class Attention(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
            return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))

    class MLP(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.fc1 = nn.Linear(d, 2 * d)
            self.fc2 = nn.Linear(2 * d, d)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn, self.mlp = Attention(d, heads), MLP(d)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class Encoder(nn.Module):
        def __init__(self, d: int = 32, heads: int = 4, depth: int = 3) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([Block(d, heads) for _ in range(depth)])
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    m = Encoder().eval()
    _silence(m.blocks[1].mlp.fc1, 7)
    m.blocks[1].mlp.fc2.weight.data[:, 7] = HUGE
    return m, (torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(1)),), "blocks.1.mlp.fc2"


BUILDERS = {"mlp": mlp, "cnn": cnn, "transformer": transformer}


def mlp_model():
    """``(module, inputs)`` of :func:`mlp`, the form ``--model faults.py:mlp_model`` takes."""
    return mlp()[:2]

"""The small models of the QNN corpus (tests/qnn/build_corpus.py): each a few ms on the HTP simulator.

``max_pool2d`` is always written with its stride (``max_pool2d(x, k, k)``): ExecuTorch 1.5.1's QNN
``max_pool2d`` builder crashes the partitioner when the stride argument is left out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class SmallCnn(torch.nn.Module):
    """conv-relu-pool twice, then a linear head: the fp16 and int8 CNN, and the dumps."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(torch.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(torch.relu(self.conv2(x)), 2, 2)
        return self.fc(x.flatten(1))


class Block(torch.nn.Module):
    """A pre-norm transformer block: two-head self-attention and a GELU MLP, with residuals."""

    def __init__(self, dim: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 2 * dim)
        self.fc2 = torch.nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // h) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Fallback(torch.nn.Module):
    """Two ops QNN has no builder for (``erf``, ``fmod``: "No node visitor, unsupported" in ExecuTorch's
    QNN partitioner) between delegated convolutions: three QNN partitions, two CPU ops."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.erf(x)
        x = torch.fmod(self.conv2(x), 0.7)
        return F.max_pool2d(torch.relu(x), 2, 2)


def cnn_input() -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return (torch.randn(1, 3, 16, 16, generator=g),)


def block_input() -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    return (torch.randn(1, 8, 32, generator=g),)


def build_cnn() -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    """``--model tests/qnn/models.py:build_cnn``: the CNN and its input (``report --backend qnn-htp``)."""
    torch.manual_seed(0)
    return SmallCnn().eval(), cnn_input()

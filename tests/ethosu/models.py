"""The Ethos-U test corpus: small int8 models of the kinds Arm's ExecuTorch examples compile.

Each ``build_<name>()`` returns ``(model, example_inputs)`` (the ``--model FILE.py:build_<name>``
form). Kept small so Vela compiles each in seconds:

* ``cnn`` — two convolutions, a mean and a linear head, plus ``argmax`` (stays on the CPU);
* ``ds_cnn`` — DS-CNN-like keyword spotting: conv + depthwise-separable blocks + average pool;
* ``mobilenet`` — MobileNetV2-like inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1 project);
* ``resnet`` — ResNet-like basic blocks with skip additions and a strided downsample;
* ``transformer`` — one transformer encoder block (attention, layer norm, MLP) whose head uses
  ``aten.sort`` and ``aten.argmax``, which the NPU does not take.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MODELS", "build_cnn", "build_ds_cnn", "build_mobilenet", "build_resnet", "build_transformer", "build"]


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        y = self.fc(x.mean((2, 3)))
        return torch.argmax(y, dim=1), y


class DSBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.bn1 = nn.BatchNorm2d(c)
        self.pw = nn.Conv2d(c, c, 1)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(self.bn2(self.pw(torch.relu(self.bn1(self.dw(x))))))


class DSCNN(nn.Module):
    """Keyword spotting on a 49x10 MFCC map (Hello Edge's DS-CNN shape, fewer channels)."""

    def __init__(self, c: int = 16, classes: int = 12) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, c, (10, 4), stride=(2, 2), padding=(5, 1))
        self.bn = nn.BatchNorm2d(c)
        self.blocks = nn.Sequential(*[DSBlock(c) for _ in range(3)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        x = self.blocks(x)
        return self.fc(torch.flatten(self.pool(x), 1))


class InvertedResidual(nn.Module):
    def __init__(self, c: int, expand: int = 4) -> None:
        super().__init__()
        h = c * expand
        self.expand = nn.Conv2d(c, h, 1)
        self.dw = nn.Conv2d(h, h, 3, padding=1, groups=h)
        self.project = nn.Conv2d(h, c, 1)

    def forward(self, x):
        y = nn.functional.relu6(self.expand(x))
        y = nn.functional.relu6(self.dw(y))
        return x + self.project(y)


class MobileNetLike(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.blocks = nn.Sequential(InvertedResidual(8), InvertedResidual(8))
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        x = nn.functional.relu6(self.stem(x))
        x = self.blocks(x)
        return self.head(x.mean((2, 3)))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.down = nn.Conv2d(cin, cout, 1, stride=stride) if (stride != 1 or cin != cout) else None

    def forward(self, x):
        y = self.conv2(torch.relu(self.conv1(x)))
        skip = x if self.down is None else self.down(x)
        return torch.relu(y + skip)


class ResNetLike(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class TransformerBlock(nn.Module):
    def __init__(self, d: int = 32, heads: int = 2, seq: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, 16)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(d, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        logits = self.head(x)
        top, _ = torch.sort(logits, dim=-1, descending=True)
        return top, torch.argmax(logits, dim=-1)


def _seeded(cls, *shape):
    torch.manual_seed(0)
    m = cls().eval()
    for mod in m.modules():  # non-trivial BatchNorm statistics so folding changes something
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
    return m, (torch.randn(*shape),)


def build_cnn():
    return _seeded(SmallCNN, 1, 3, 16, 16)


def build_ds_cnn():
    return _seeded(DSCNN, 1, 1, 49, 10)


def build_mobilenet():
    return _seeded(MobileNetLike, 1, 3, 16, 16)


def build_resnet():
    return _seeded(ResNetLike, 1, 3, 16, 16)


def build_transformer():
    return _seeded(TransformerBlock, 1, 8, 32)


build = build_cnn

MODELS = {"cnn": build_cnn, "ds_cnn": build_ds_cnn, "mobilenet": build_mobilenet, "resnet": build_resnet,
          "transformer": build_transformer}

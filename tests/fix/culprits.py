"""Seeded models with a known int8 culprit, for ``etlens fix`` and the introduced-error ranking.

``make_case(kind, seed)`` returns ``(model, inputs, culprits)``: a float model with random weights
where one layer is made hostile to int8, and the module path(s) of that layer. Kinds:

* ``mlp`` — 20 ``Linear`` + ReLU layers (width 32); the culprit is one layer, chosen by the seed,
  made hostile in one of two ways (seed parity): a weight input column scaled by 300 (per-channel
  weight scales cannot hold it: every output channel's scale is set by that column), or an output
  channel scaled by 300 (the activation's per-tensor range is dominated by one channel);
* ``mlp_act`` — 6 ``Linear`` + ReLU layers with an activation culprit in ``layers.2`` or ``layers.3``
  (small enough to lower in the tests);
* ``cnn`` — 8 conv + ReLU layers, the same two hostilities on a conv;
* ``bert`` — a tiny ``transformers`` BERT encoder (2 layers, hidden 32, random weights) with one
  attention / feed-forward projection made hostile;
* ``block`` — a stack of pre-LayerNorm transformer blocks (attention + ``fc1`` → GELU → ``fc2``,
  hidden 32, plain ``torch.nn``; 2 or 3 blocks by seed) whose ``blocks.N.fc1`` emits a massive
  activation channel that ``fc2`` ignores: an activation culprit whose output goes to ``fc2`` through
  the GELU (int8 runs the GELU in float; ``fc2`` quantizes its input again). The culprit list is
  ``[blocks.N.fc1, blocks.N.fc2]``: what keeping the culprit in float takes.

The culprit layer sits in the first half of the stack, so error it brings in accumulates through the
healthy layers after it: the accumulated-error ranking puts later layers first.
"""

from __future__ import annotations

import torch

__all__ = ["make_case", "KINDS"]

KINDS = ("mlp", "cnn", "bert", "block")


class MLP(torch.nn.Module):
    def __init__(self, depth: int = 20, width: int = 32):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(width, width) for _ in range(depth)])
        self.act = torch.nn.ReLU()
        with torch.no_grad():  # He init: the signal keeps its scale through 20 ReLU layers
            for layer in self.layers:
                layer.weight.normal_(0.0, (2.0 / width) ** 0.5)
                layer.bias.normal_(0.0, 0.1)

    def forward(self, x):
        for layer in self.layers:
            x = self.act(layer(x))
        return x


class CNN(torch.nn.Module):
    def __init__(self, depth: int = 8, ch: int = 16):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, ch, 3, padding=1)
        self.convs = torch.nn.ModuleList([torch.nn.Conv2d(ch, ch, 3, padding=1) for _ in range(depth - 1)])
        self.act = torch.nn.ReLU()
        with torch.no_grad():  # He init: the signal keeps its scale through the stack
            for conv in [self.stem, *self.convs]:
                fan_in = conv.weight[0].numel()
                conv.weight.normal_(0.0, (2.0 / fan_in) ** 0.5)
                conv.bias.normal_(0.0, 0.1)

    def forward(self, x):
        x = self.act(self.stem(x))
        for conv in self.convs:
            x = self.act(conv(x))
        return x


class Attention(torch.nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads

        def split(y):
            return y.view(b, t, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        a = torch.softmax(q @ k.transpose(-1, -2) * (d // h) ** -0.5, dim=-1)
        return self.o((a @ v).transpose(1, 2).reshape(b, t, d))


class Block(torch.nn.Module):
    """Pre-LayerNorm transformer block: attention, then the feed-forward ``fc1`` → GELU → ``fc2``."""

    def __init__(self, d: int = 32, heads: int = 2, ff: int = 64):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.fc1, self.act, self.fc2 = torch.nn.Linear(d, ff), torch.nn.GELU(), torch.nn.Linear(ff, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class Blocks(torch.nn.Module):
    def __init__(self, n: int = 2, d: int = 32):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(d) for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _weight_outlier(prev_w, prev_b, w, k: int = 3) -> None:
    """Input channel ``k`` of ``w`` is dead (its producer always outputs ~0) and carries weights 300x
    the others: harmless in float, but per-channel int8 weight scales set by it round every other
    weight of the layer to (nearly) zero."""
    with torch.no_grad():
        prev_w[k] = 0.0
        prev_b[k] = -10.0
        w[:, k] *= 300.0


def _activation_outlier(w, b, next_w, j: int = 5) -> None:
    """Output channel ``j`` of ``w`` sits near 1000 (a "massive activation"), ~1000x the others, which
    the next layer ignores: harmless in float, but the per-tensor int8 activation scale it sets crushes
    every other channel."""
    with torch.no_grad():
        w[j] *= 10.0
        b[j] = 1000.0
        next_w[:, j] = 0.0


def make_case(kind: str, seed: int):
    """``(model, inputs, culprit module paths)`` for ``kind`` and ``seed`` (deterministic)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(1000 + seed)
    if kind == "mlp":
        model = MLP().eval()
        c = 1 + (seed * 7) % 9  # layers 1..9: healthy layers follow
        L = model.layers
        if seed % 2 == 0:
            _weight_outlier(L[c - 1].weight, L[c - 1].bias, L[c].weight)
        else:
            _activation_outlier(L[c].weight, L[c].bias, L[c + 1].weight)
        return model, (torch.randn(16, 32, generator=gen),), [f"layers.{c}"]
    if kind == "mlp_act":  # small: 6 layers, an activation culprit (for the lowered end-to-end checks)
        model = MLP(depth=6).eval()
        c = 2 + seed % 2
        _activation_outlier(model.layers[c].weight, model.layers[c].bias, model.layers[c + 1].weight)
        return model, (torch.randn(16, 32, generator=gen),), [f"layers.{c}"]
    if kind == "cnn":
        model = CNN().eval()
        c = 1 + (seed * 3) % 4
        convs = [model.stem, *model.convs]
        if seed % 2 == 0:
            _weight_outlier(convs[c - 1].weight, convs[c - 1].bias, convs[c].weight)
        else:
            _activation_outlier(convs[c].weight, convs[c].bias, convs[c + 1].weight)
        return model, (torch.randn(1, 3, 16, 16, generator=gen),), [f"convs.{c - 1}"]
    if kind == "bert":
        from transformers import BertConfig, BertModel

        cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                         vocab_size=64, max_position_embeddings=32, attn_implementation="eager")
        bert = BertModel(cfg, add_pooling_layer=False).eval()

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = bert.encoder

            def forward(self, h):
                return self.encoder(h)[0]

        model = Block().eval()
        i = seed % 2
        layer = model.encoder.layer[i]
        which = (seed // 2) % 3
        if which == 0:  # feed-forward up-projection: an activation outlier the GELU passes on
            _activation_outlier(layer.intermediate.dense.weight, layer.intermediate.dense.bias,
                                layer.output.dense.weight)
            path = f"encoder.layer.{i}.intermediate.dense"
        elif which == 1:  # feed-forward down-projection: a weight outlier on a dead GELU channel
            _weight_outlier(layer.intermediate.dense.weight, layer.intermediate.dense.bias, layer.output.dense.weight)
            path = f"encoder.layer.{i}.output.dense"
        else:  # attention value projection: an activation outlier the attention output ignores
            _activation_outlier(layer.attention.self.value.weight, layer.attention.self.value.bias,
                                layer.attention.output.dense.weight)
            path = f"encoder.layer.{i}.attention.self.value"
        return model, (torch.randn(1, 8, 32, generator=gen),), [path]
    if kind == "block":  # transformer blocks, an activation culprit in blocks.N.fc1 consumed by blocks.N.fc2
        model = Blocks(n=2 + seed % 2).eval()
        c = seed % len(model.blocks)
        block = model.blocks[c]
        _activation_outlier(block.fc1.weight, block.fc1.bias, block.fc2.weight, j=3 + seed % 5)
        return model, (torch.randn(1, 8, 32, generator=gen),), [f"blocks.{c}.fc1", f"blocks.{c}.fc2"]
    raise ValueError(kind)


def write_model_file(path: str, kind: str, seed: int) -> str:
    """A ``--model FILE.py:build`` file that builds ``make_case(kind, seed)``."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    with open(path, "w", encoding="utf-8") as f:
        f.write("import sys\n"
                f"sys.path.insert(0, {here!r})\n"
                "from culprits import make_case\n\n\n"
                "def build():\n"
                f"    model, inputs, _ = make_case({kind!r}, {seed})\n"
                "    return model, inputs\n")
    return path

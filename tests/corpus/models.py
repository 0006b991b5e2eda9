"""The real-architecture corpus: models people ship, built from ``transformers`` configs.

Every builder returns ``(module, example_inputs)`` — the form ``etlens report --model FILE.py:FN``
takes — for a real architecture with small dimensions and random weights (no download; the seed
is fixed so two builds give the same weights). Each output is one tensor (the wrapper picks
``logits`` or ``last_hidden_state``), which is what a deployed program returns.

The table :data:`CORPUS` says what each entry stands for and which flows it is expected to take::

    python -m etlens report --model tests/corpus/models.py:gpt2 --quantize -o gpt2.html

Sizes are chosen so that the whole corpus lowers, runs and reports inside the CI budget on a
2-core machine: one or two layers, hidden sizes 32-64, 16 tokens, 32x32 images.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Entry", "CORPUS", "build"]


def _torch():
    import torch

    torch.manual_seed(0)
    return torch


def _wrap(model: Any, key: str) -> Any:
    torch = _torch()

    class Deployed(torch.nn.Module):
        """Return the one tensor a deployed program would: ``out[key]``."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            out = self.inner(*args)
            return out if isinstance(out, torch.Tensor) else out[key]

    return Deployed(model).eval()


def _token_ids(n: int = 16, vocab: int = 96) -> tuple:
    torch = _torch()
    return (torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(1)),)


def _image(size: int = 32, channels: int = 3) -> tuple:
    torch = _torch()
    return (torch.randn(1, channels, size, size, generator=torch.Generator().manual_seed(1)),)


# --- microcontroller models (plain torch: transformers has no such architecture) ---------------------

def ds_cnn():
    """DS-CNN keyword spotting (MLPerf Tiny's Cortex-M benchmark, small): a strided stem conv, then
    depthwise-separable blocks (3x3 depthwise + 1x1 pointwise, BatchNorm, ReLU), average pool,
    linear classifier over 12 keywords; input: one 49x10 MFCC map."""
    torch = _torch()
    nn = torch.nn

    def block(c_in: int, c_out: int) -> Any:
        return nn.Sequential(nn.Conv2d(c_in, c_in, 3, padding=1, groups=c_in, bias=False), nn.BatchNorm2d(c_in),
                             nn.ReLU(), nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU())

    model = nn.Sequential(
        nn.Conv2d(1, 16, (10, 4), stride=2, padding=(5, 1), bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        block(16, 16), block(16, 24), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 12))
    with torch.no_grad():  # non-trivial BatchNorm statistics, as a trained model has
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval(), (torch.randn(1, 1, 49, 10, generator=torch.Generator().manual_seed(1)),)


# --- encoder transformers -------------------------------------------------------------------------

def bert():
    """BERT encoder (post-LN, absolute positions, GELU), token ids in."""
    import transformers as T

    _torch()
    cfg = T.BertConfig(vocab_size=96, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                       intermediate_size=128, max_position_embeddings=32)
    return _wrap(T.BertModel(cfg, add_pooling_layer=False), "last_hidden_state"), _token_ids()


def distilbert():
    """DistilBERT encoder, token ids in."""
    import transformers as T

    _torch()
    cfg = T.DistilBertConfig(vocab_size=96, dim=64, n_layers=1, n_heads=4, hidden_dim=128,
                             max_position_embeddings=32)
    return _wrap(T.DistilBertModel(cfg), "last_hidden_state"), _token_ids()


def t5_encoder():
    """The encoder of T5 (an encoder-decoder model): RMSNorm, relative position bias, no biases."""
    import transformers as T

    _torch()
    cfg = T.T5Config(vocab_size=96, d_model=64, d_kv=16, d_ff=128, num_layers=1, num_heads=4)
    return _wrap(T.T5EncoderModel(cfg), "last_hidden_state"), _token_ids()


# --- decoder-only language models -----------------------------------------------------------------

def gpt2():
    """GPT-2 LM: causal mask, learned positions, Conv1D projections, tied LM head."""
    import transformers as T

    _torch()
    cfg = T.GPT2Config(vocab_size=96, n_embd=64, n_layer=1, n_head=4, n_positions=32,
                       bos_token_id=0, eos_token_id=0)
    return _wrap(T.GPT2LMHeadModel(cfg), "logits"), _token_ids()


def llama():
    """Llama LM: causal mask, RoPE, grouped-query attention (4 query heads, 2 KV heads), SwiGLU, RMSNorm."""
    import transformers as T

    _torch()
    cfg = T.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    return _wrap(T.LlamaForCausalLM(cfg), "logits"), _token_ids()


# --- vision ---------------------------------------------------------------------------------------

def vit():
    """Vision Transformer: patch embedding conv, CLS token, pre-LN encoder."""
    import transformers as T

    _torch()
    cfg = T.ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                      intermediate_size=128)
    return _wrap(T.ViTModel(cfg, add_pooling_layer=False), "last_hidden_state"), _image()


def convnext():
    """ConvNeXt (modern CNN): 7x7 depthwise convs, LayerNorm, inverted bottlenecks, layer scale."""
    import transformers as T

    _torch()
    cfg = T.ConvNextConfig(num_channels=3, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1], image_size=32)
    return _wrap(T.ConvNextModel(cfg), "last_hidden_state"), _image()


def resnet():
    """ResNet (classic CNN): conv + batch norm + ReLU, residual bottlenecks, max pool."""
    import transformers as T

    _torch()
    cfg = T.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1])
    return _wrap(T.ResNetModel(cfg), "last_hidden_state"), _image()


def mobilevit():
    """MobileViT (hybrid CNN-transformer): inverted residuals then a MobileViT block (unfold, attention, fold).

    The first three stages of the encoder (the third holds the first transformer block); the
    full model has ~730 nodes, which costs minutes to lower on a 2-core machine.
    """
    import transformers as T

    torch = _torch()
    cfg = T.MobileViTConfig(image_size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
                            num_attention_heads=2)
    model = T.MobileViTModel(cfg, expand_output=False)
    model.encoder.layer = torch.nn.ModuleList(list(model.encoder.layer)[:3])
    return _wrap(model, "last_hidden_state"), _image(64)


def segformer():
    """SegFormer (segmentation): overlapping patch embeddings, efficient attention with spatial reduction,
    Mix-FFN with a depthwise conv, all-MLP decoder head with upsampling."""
    import transformers as T

    _torch()
    cfg = T.SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                            hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2],
                            mlp_ratios=[2, 2],
                            decoder_hidden_size=32, num_labels=4)
    return _wrap(T.SegformerForSemanticSegmentation(cfg), "logits"), _image(64)


def swin():
    """Swin Transformer: shifted windows, relative position bias, patch merging."""
    import transformers as T

    _torch()
    cfg = T.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4)
    return _wrap(T.SwinModel(cfg, add_pooling_layer=False), "last_hidden_state"), _image()


# --- audio ----------------------------------------------------------------------------------------

def wav2vec2():
    """wav2vec 2.0: conv feature extractor over raw audio, conv positional embedding, transformer encoder."""
    import transformers as T

    torch = _torch()
    cfg = T.Wav2Vec2Config(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128,
                           conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                           num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
    audio = torch.randn(1, 1600, generator=torch.Generator().manual_seed(1))
    return _wrap(T.Wav2Vec2Model(cfg), "last_hidden_state"), (audio,)


def whisper_encoder():
    """Whisper's audio encoder: two 1-D convs over log-mel frames, sinusoidal positions, pre-LN transformer."""
    import transformers as T
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch = _torch()
    cfg = T.WhisperConfig(d_model=64, encoder_layers=1, encoder_attention_heads=4, encoder_ffn_dim=128,
                          num_mel_bins=16, max_source_positions=32)
    mel = torch.randn(1, 16, 64, generator=torch.Generator().manual_seed(1))
    return _wrap(WhisperEncoder(cfg), "last_hidden_state"), (mel,)


# --- recurrent and control-flow-heavy models (plain torch and ExecuTorch's own example) ----------------
# Tiny sizes (hidden 8-20, 4-5 steps): each is a few hundred nodes once export unrolls the time loop.

def _seq(*shape: int) -> Any:
    torch = _torch()
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


def lstm():
    """torch.nn.LSTM, 2 layers, sequence-first, with its state given: nested inputs ``(x, (h0, c0))``,
    nested outputs ``(y, (h, c))``; export unrolls the time loop into one cell per step."""
    torch = _torch()
    model = torch.nn.LSTM(input_size=6, hidden_size=8, num_layers=2)
    return model.eval(), (_seq(4, 2, 6), (_seq(2, 2, 8) * 0.5, _seq(2, 2, 8) * 0.5))


def gru():
    """torch.nn.GRU, 2 layers, batch-first, initial state given: inputs ``(x, h0)``."""
    torch = _torch()
    model = torch.nn.GRU(input_size=6, hidden_size=8, num_layers=2, batch_first=True)
    return model.eval(), (_seq(2, 4, 6), _seq(2, 2, 8) * 0.5)


def lstm_example():
    """ExecuTorch's own LSTM example (``executorch.examples.models.lstm``: ``torch.nn.quantizable`` LSTM,
    2 layers, hidden 20, 5 steps), with its nested example inputs ``(x, (h0, c0))``."""
    _torch()
    from executorch.examples.models.lstm import LSTMModel

    example = LSTMModel()
    return example.get_eager_model().eval(), example.get_example_inputs()


def rnn_loop():
    """A hand-written Elman RNN cell stepped over time in a Python loop (export unrolls it), with the
    state carried as a dict ``{"h": h0}`` next to the sequence: ``(x, {"h": h0})``; returns every step's
    state stacked and the last one."""
    torch = _torch()
    nn = torch.nn

    class Loop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(6, 8)
            self.rec = nn.Linear(8, 8, bias=False)
            self.head = nn.Linear(8, 4)

        def forward(self, x: Any, state: dict) -> Any:
            h = state["h"]
            outs = []
            for t in range(x.shape[1]):
                h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
                outs.append(self.head(h))
            return torch.stack(outs, dim=1), h

    return Loop().eval(), (_seq(2, 4, 6), {"h": _seq(2, 8) * 0.5})


@dataclass(frozen=True)
class Entry:
    """One architecture of the corpus and what it stands for."""

    name: str
    build: Callable[[], tuple]
    family: str
    #: the model takes integer token ids (quantization must leave them alone)
    token_ids: bool = False


CORPUS: dict[str, Entry] = {e.name: e for e in [
    Entry("bert", bert, "encoder transformer", token_ids=True),
    Entry("distilbert", distilbert, "encoder transformer", token_ids=True),
    Entry("gpt2", gpt2, "decoder-only LM (causal)", token_ids=True),
    Entry("llama", llama, "decoder-only LM (causal, RoPE, GQA)", token_ids=True),
    Entry("t5_encoder", t5_encoder, "encoder of an encoder-decoder model", token_ids=True),
    Entry("vit", vit, "vision transformer"),
    Entry("convnext", convnext, "modern CNN"),
    Entry("resnet", resnet, "classic CNN"),
    Entry("mobilevit", mobilevit, "hybrid CNN-transformer"),
    Entry("segformer", segformer, "segmentation backbone + head"),
    Entry("swin", swin, "windowed vision transformer"),
    Entry("wav2vec2", wav2vec2, "audio, conv feature extractor + transformer"),
    Entry("whisper_encoder", whisper_encoder, "audio encoder (conv + transformer)"),
    Entry("ds_cnn", ds_cnn, "microcontroller CNN (keyword spotting, depthwise-separable)"),
    Entry("lstm", lstm, "recurrent (torch.nn.LSTM, 2 layers, nested inputs)"),
    Entry("gru", gru, "recurrent (torch.nn.GRU, 2 layers, batch-first)"),
    Entry("lstm_example", lstm_example, "recurrent (ExecuTorch's LSTM example, nested inputs)"),
    Entry("rnn_loop", rnn_loop, "recurrent (Python loop unrolled by export, dict state)"),
]}


def build(name: str) -> tuple:
    """``(module, example_inputs)`` of corpus entry ``name``."""
    return CORPUS[name].build()

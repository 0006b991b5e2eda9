"""More architectures from ``transformers``, beyond the corpus: the sweep (``scripts/sweep_archs.py``).

The corpus (:mod:`tests.corpus.models`) is what CI checks deeply against ExecuTorch on every run; these
are what a user might bring next. The sweep runs ``etlens report --model tests/corpus/extra.py:NAME``
(fp32 and ``--quantize``) on each and writes a table of what worked, so a new architecture that breaks
a flow is found before a user finds it. Same conventions as the corpus: small configs, random
weights, fixed seed, one output tensor.
"""

from __future__ import annotations

from typing import Any

from tests.corpus.models import _image, _token_ids, _torch, _wrap

__all__ = ["EXTRA", "build"]


def _hf(config: str, model: str, key: str, inputs: Any, **cfg: Any) -> tuple:
    import transformers as T

    _torch()
    c = getattr(T, config)(**cfg)
    return _wrap(getattr(T, model)(c), key), inputs()


_TEXT = dict(vocab_size=96, hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128,
             max_position_embeddings=32)
_DECODER = dict(_TEXT, num_key_value_heads=2)
_VISION = dict(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
               intermediate_size=128)


def roberta():
    return _hf("RobertaConfig", "RobertaModel", "last_hidden_state", _token_ids, **dict(_TEXT, pad_token_id=1))


def albert():
    return _hf("AlbertConfig", "AlbertModel", "last_hidden_state", _token_ids, embedding_size=32, **_TEXT)


def electra():
    return _hf("ElectraConfig", "ElectraModel", "last_hidden_state", _token_ids, embedding_size=32, **_TEXT)


def qwen2():
    return _hf("Qwen2Config", "Qwen2ForCausalLM", "logits", _token_ids, **_DECODER)


def mistral():
    return _hf("MistralConfig", "MistralForCausalLM", "logits", _token_ids, **_DECODER)


def phi3():
    return _hf("Phi3Config", "Phi3ForCausalLM", "logits", _token_ids, **dict(_DECODER, pad_token_id=0))


def gemma():
    return _hf("GemmaConfig", "GemmaForCausalLM", "logits", _token_ids, head_dim=16, **_DECODER)


def opt():
    return _hf("OPTConfig", "OPTForCausalLM", "logits", _token_ids, vocab_size=96, hidden_size=64,
               num_hidden_layers=1, num_attention_heads=4, ffn_dim=128, max_position_embeddings=32,
               word_embed_proj_dim=64, pad_token_id=1)


def bloom():
    return _hf("BloomConfig", "BloomForCausalLM", "logits", _token_ids, vocab_size=96, hidden_size=64, n_layer=1,
               n_head=4)


def gpt_neox():
    return _hf("GPTNeoXConfig", "GPTNeoXForCausalLM", "logits", _token_ids, **_TEXT)


def deit():
    return _hf("DeiTConfig", "DeiTModel", "last_hidden_state", _image, **_VISION)


def beit():
    return _hf("BeitConfig", "BeitModel", "last_hidden_state", _image, use_relative_position_bias=True, **_VISION)


def dinov2():
    return _hf("Dinov2Config", "Dinov2Model", "last_hidden_state", _image, **_VISION)


def clip_vision():
    return _hf("CLIPVisionConfig", "CLIPVisionModel", "last_hidden_state", _image, **_VISION)


def mobilenet_v2():
    return _hf("MobileNetV2Config", "MobileNetV2Model", "last_hidden_state", _image, image_size=32,
               depth_multiplier=0.35)


def efficientnet():
    return _hf("EfficientNetConfig", "EfficientNetModel", "last_hidden_state", _image, image_size=32,
               width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320)


def regnet():
    return _hf("RegNetConfig", "RegNetModel", "last_hidden_state", _image, embedding_size=16,
               hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1], groups_width=8)


def convnextv2():
    return _hf("ConvNextV2Config", "ConvNextV2Model", "last_hidden_state", _image, hidden_sizes=[16, 32, 48, 64],
               depths=[1, 1, 1, 1])


def levit():
    return _hf("LevitConfig", "LevitModel", "last_hidden_state", lambda: _image(64), image_size=64,
               hidden_sizes=[32, 48, 64], num_attention_heads=[2, 3, 4], depths=[1, 1, 1], key_dim=[8, 8, 8])


def poolformer():
    return _hf("PoolFormerConfig", "PoolFormerModel", "last_hidden_state", _image, hidden_sizes=[16, 32, 48, 64],
               depths=[1, 1, 1, 1])


def hubert():
    torch = _torch()
    return _hf("HubertConfig", "HubertModel", "last_hidden_state",
               lambda: (torch.randn(1, 1600, generator=torch.Generator().manual_seed(1)),),
               hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128,
               conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
               num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)


def bart_encoder():
    import transformers as T

    _torch()
    cfg = T.BartConfig(vocab_size=96, d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                       decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=32)
    return _wrap(T.BartModel(cfg).get_encoder(), "last_hidden_state"), _token_ids()


EXTRA = {f.__name__: f for f in [roberta, albert, electra, qwen2, mistral, phi3, gemma, opt, bloom, gpt_neox, deit,
                                 beit, dinov2, clip_vision, mobilenet_v2, efficientnet, regnet, convnextv2, levit,
                                 poolformer, hubert, bart_encoder]}


def build(name: str) -> tuple:
    """``(module, example_inputs)`` of the extra architecture ``name``."""
    return EXTRA[name]()

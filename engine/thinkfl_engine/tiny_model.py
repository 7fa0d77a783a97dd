"""The tiny CI model: a transformers LlamaForCausalLM (or Qwen2ForCausalLM) from a small config.

What made the prototype learn carries over to these weights (shared notes/tiny-model.md):
attention value and output projections start near the identity, token embeddings have std
~0.3. `embedding_std` is an init setting only; it is not written to config.json.
"""

import math
from typing import Any, Dict

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

ARCHITECTURES = ('llama', 'qwen2')
INIT_KEYS = ('embedding_std',)


def tiny_config(raw: Dict[str, Any]):
    """A transformers config from the sizes of create_tiny (model_type 'llama' unless `architecture` says)."""
    c = dict(raw)
    arch = c.pop('architecture', 'llama')
    if arch not in ARCHITECTURES:
        raise ValueError(f'config.architecture must be one of {list(ARCHITECTURES)}, got {arch!r}')
    for k in INIT_KEYS:
        c.pop(k, None)
    heads, kv = c.get('num_attention_heads', 4), c.get('num_key_value_heads', c.get('num_attention_heads', 4))
    if heads % kv:
        raise ValueError('config: num_attention_heads must be a multiple of num_key_value_heads')
    c.setdefault('tie_word_embeddings', False)
    return AutoConfig.for_model(arch, **c)


def create_tiny_model(raw: Dict[str, Any], seed: int) -> PreTrainedModel:
    config = tiny_config(raw)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    init_copy_friendly(model, seed, float(raw.get('embedding_std', 0.3)))
    return model


def init_copy_friendly(model: PreTrainedModel, seed: int, embedding_std: float) -> None:
    """Random init in place, deterministic for a seed; biases (Qwen2's q/k/v) start at zero."""
    c = model.config
    g = torch.Generator().manual_seed(seed)

    def normal(w: torch.Tensor, std: float) -> None:
        with torch.no_grad():
            w.copy_(torch.randn(w.shape, generator=g) * std)

    def near_identity(w: torch.Tensor) -> None:
        with torch.no_grad():
            w.copy_(torch.eye(*w.shape) + torch.randn(w.shape, generator=g) * 0.02)

    normal(model.get_input_embeddings().weight, embedding_std)
    for layer in model.model.layers:
        a = layer.self_attn
        normal(a.q_proj.weight, c.hidden_size**-0.5)
        normal(a.k_proj.weight, c.hidden_size**-0.5)
        near_identity(a.v_proj.weight)
        near_identity(a.o_proj.weight)
        for proj in (a.q_proj, a.k_proj, a.v_proj, a.o_proj):
            if proj.bias is not None:
                torch.nn.init.zeros_(proj.bias)
        normal(layer.mlp.gate_proj.weight, 0.02)
        normal(layer.mlp.up_proj.weight, 0.02)
        normal(layer.mlp.down_proj.weight, 0.02 / math.sqrt(2 * c.num_hidden_layers))
    normal(model.get_output_embeddings().weight, 0.02)

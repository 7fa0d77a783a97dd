"""Final hidden states of a causal LM's decoder, the last layer only where a log-probability is wanted.

A loss reads the output head at a few positions (an SFT or GRPO sample trains on its ~7% generated
tokens). Every layer but the last must still run at every position, as later positions' keys and
values read them; the last layer's output feeds only the head, so its query, attention output and
MLP are needed at those positions alone, while its keys and values are computed everywhere. An SFT
step of the tiny model (3 layers) took 0.78x its time (scripts/bench/sft-step-last-layer.py); on a
28-layer backbone it is at most a 28th of the layers' work.

The same modules run (so LoRA adapters apply as in the decoder's own forward), with the equations of
transformers' Llama and Qwen2 decoder layers; other architectures, sliding-window layers, attention
dropout and weights partitioned by DeepSpeed ZeRO-3 take the decoder's own forward.
"""

import sys
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import nn

# Decoder layers whose forward is the pre-norm attention + MLP block reproduced in `_last_layer_at`.
SUPPORTED = ('llama', 'qwen2')


def selective(decoder: nn.Module) -> bool:
    """Whether `decoder_hidden_at` may run this decoder's last layer at chosen positions only."""
    config = decoder.config
    types = getattr(config, 'layer_types', None) or ['full_attention']
    return (
        getattr(config, 'model_type', None) in SUPPORTED
        and all(t == 'full_attention' for t in types)
        and not getattr(config, 'use_sliding_window', False)
        and float(getattr(config, 'attention_dropout', 0.0) or 0.0) == 0.0
        # ZeRO-3 gathers (and prefetches, by the order of past calls) each module's weights on every rank
        # together: ranks must call the same modules in the same order, whatever rows they hold.
        and not any(hasattr(p, 'ds_id') for p in decoder.parameters())
    )


def decoder_hidden_at(
    decoder: nn.Module, ids: torch.Tensor, attention_mask: torch.Tensor, at: torch.Tensor
) -> torch.Tensor:
    """[N, H] final (normed) hidden states at the N (row, position) pairs of `at` ([N, 2], in that order).

    Rows are right-padded (`attention_mask` 1 on each row's first tokens); a position attends to the
    positions up to itself, which are never padding.
    """
    config = decoder.config
    embeds = decoder.embed_tokens(ids)
    positions = torch.arange(ids.shape[1], device=ids.device)[None]
    mask = _causal_mask(decoder, embeds, attention_mask, positions)
    cos, sin = decoder.rotary_emb(embeds, position_ids=positions)
    hidden = embeds
    layers = decoder.layers[: config.num_hidden_layers]
    for layer in layers[:-1]:
        hidden = layer(hidden, attention_mask=mask, position_embeddings=(cos, sin), position_ids=positions)
    parts: List[torch.Tensor] = []
    for row in at[:, 0].unique_consecutive().tolist():
        where = at[at[:, 0] == row, 1]
        parts.append(_last_layer_at(layers[-1], hidden[row : row + 1], (cos, sin), where))
    return decoder.norm(torch.cat(parts))


def _causal_mask(decoder: nn.Module, embeds, attention_mask, positions):
    # The decoder's own mask for its layers (transformers picks its form for the attention implementation).
    create = sys.modules[type(decoder).__module__].create_causal_mask
    return create(
        config=decoder.config,
        inputs_embeds=embeds,
        attention_mask=attention_mask,
        past_key_values=None,
        position_ids=positions,
    )


def _last_layer_at(
    layer: nn.Module, hidden: torch.Tensor, rope: Tuple[torch.Tensor, torch.Tensor], where: torch.Tensor
) -> torch.Tensor:
    """[K, H]: the decoder layer's output of one row ([1, T, H]) at its positions `where` ([K])."""
    attn = layer.self_attn
    rotate = sys.modules[type(attn).__module__].apply_rotary_pos_emb
    d = attn.head_dim
    cos, sin = rope
    x = layer.input_layernorm(hidden)
    q = attn.q_proj(x[:, where]).view(1, len(where), -1, d).transpose(1, 2)
    k = attn.k_proj(x).view(1, x.shape[1], -1, d).transpose(1, 2)
    v = attn.v_proj(x).view(1, x.shape[1], -1, d).transpose(1, 2)
    q, _ = rotate(q, q, cos[:, where], sin[:, where])
    k, _ = rotate(k, k, cos, sin)
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    visible = torch.arange(x.shape[1], device=x.device)[None] <= where[:, None]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible[None, None], scale=attn.scaling)
    out = attn.o_proj(out.transpose(1, 2).reshape(1, len(where), -1))
    h = hidden[:, where] + out
    h = h + layer.mlp(layer.post_attention_layernorm(h))
    return h[0]


def query_positions(needed: torch.Tensor) -> torch.Tensor:
    """[N, 2] (row, position) of the hidden states a head reads for `needed` ([B, T], nonzero where a token's
    log-probability is wanted; position t is predicted at position t - 1), row-major; (0, 0) when none."""
    at = needed[:, 1:].nonzero()
    return at if len(at) else torch.zeros(1, 2, dtype=torch.long, device=needed.device)

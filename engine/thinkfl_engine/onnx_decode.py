"""ONNX export of a forward step on a shared-prefix KV cache (the onnx backend's batched decoding).

Rows that share a prompt (a GRPO group's samples) share its key/values: the step attends each
group's prefix once for all its rows, as one matrix product, instead of once per row. The
batch is laid out as G groups x R row slots (N = G * R rows, row n in group n // R). Each row
feeds T new tokens, causal among themselves: T = 1 decodes, T = prompt length prefills.

Inputs (float32 unless said):
  input_ids [N,T], position_ids [N,T] (int64): each row's new tokens and their positions;
  prefix_mask [G,P]: 0 where a group's prefix position holds a token, -inf on padding;
  suffix_mask [N,S]: the same for each row's own positions (its generated tokens);
  prefix.{i}.key/value [G,kv_heads,P,head_dim]; suffix.{i}.key/value [G,kv_heads,R,S,head_dim].
Outputs: logits [N,V] of each row's last new token and new.{i}.key/value [G,kv_heads,R,T,head_dim],
the new tokens' key/values (after rotary embedding, as transformers caches them), which the
caller appends to the suffix (or, from a prefill, G = R = 1, keeps as a prefix).

The attention runs with each group's rows side by side under each key/value head, the layout of
the suffix, so that the step moves its queries into it once and its output out of it once: on a
small model a step costs mostly per operator run (scripts/bench/onnx-decode-steps.ts counts them).
G, R, T, P and S are dynamic; P and S are at least 1 (a fully masked position is allowed).

The attention is written out here (eager math, float32) for the decoder layout Llama and Qwen2
share; other architectures have no decode graph and decode on the whole-cache graph instead.
"""

from pathlib import Path

import torch
from torch import nn
from transformers import PreTrainedModel

from .onnx_export import head_dim, trace_to_onnx

DECODE_FILE = 'decode.onnx'
SUPPORTED = ('llama', 'qwen2')


def has_decode_graph(config) -> bool:
    """Whether the decode graph is written for this model: Llama or Qwen2 without sliding-window layers."""
    return config.model_type in SUPPORTED and 'sliding_attention' not in (getattr(config, 'layer_types', None) or [])


class _DecodeStep(nn.Module):
    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model
        c = model.config
        self.heads = c.num_attention_heads
        self.kv_heads = getattr(c, 'num_key_value_heads', None) or c.num_attention_heads
        self.head_dim = head_dim(c)
        # transformers' rotate_half as a product with a constant: x @ rotate = cat(-x2, x1), exactly
        # (one +-1 a column), in one operator where the traced slicing of x's halves takes nine.
        half = self.head_dim // 2
        rotate = torch.zeros(self.head_dim, self.head_dim)
        rotate[torch.arange(half) + half, torch.arange(half)] = -1.0
        rotate[torch.arange(half), torch.arange(half) + half] = 1.0
        self.register_buffer('rotate', rotate, persistent=False)

    def forward(self, input_ids, position_ids, prefix_mask, suffix_mask, *flat):
        base = self.model.model
        layers = len(base.layers)
        n, t = input_ids.shape
        g_count = prefix_mask.shape[0]
        p_len, s_len = prefix_mask.shape[1], suffix_mask.shape[1]
        r = n // g_count
        heads, kvh, hd = self.heads, self.kv_heads, self.head_dim
        g = heads // kvh
        x = base.embed_tokens(input_ids)
        cos, sin = base.rotary_emb(x, position_ids)
        # For [G, R, T, heads, head_dim] (query heads as [kv_heads, g]: transformers' repeat_kv order).
        cos_k, sin_k = cos.reshape(g_count, r, t, 1, hd), sin.reshape(g_count, r, t, 1, hd)
        cos_q, sin_q = cos_k[..., None, :], sin_k[..., None, :]
        pmask = prefix_mask[:, None, None, :]
        smask = suffix_mask.reshape(g_count, 1, r, 1, s_len)
        # Causal among the new tokens, from their positions, for each of a row's g*T queries: [G, 1, R, g*T, T].
        later = position_ids[:, None, :] > position_ids[:, :, None]
        causal = torch.where(later, torch.tensor(float('-inf')), torch.tensor(0.0)).reshape(g_count, 1, r, 1, t, t)
        causal = causal.expand(g_count, 1, r, g, t, t).reshape(g_count, 1, r, g * t, t)
        news = []
        for i, layer in enumerate(base.layers):
            pk, pv = flat[2 * i], flat[2 * i + 1]
            sk, sv = flat[2 * layers + 2 * i], flat[2 * layers + 2 * i + 1]
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_proj(h).view(g_count, r, t, kvh, g, hd)
            k = attn.k_proj(h).view(g_count, r, t, kvh, hd)
            q = q * cos_q + torch.matmul(q, self.rotate) * sin_q
            k = k * cos_k + torch.matmul(k, self.rotate) * sin_k
            # Each row's queries of one key/value head in a row: [G, kv_heads, R, g*T, head_dim].
            q = q.permute(0, 3, 1, 4, 2, 5).reshape(g_count, kvh, r, g * t, hd)
            k = k.permute(0, 3, 1, 2, 4)
            v = attn.v_proj(h).view(g_count, r, t, kvh, hd).permute(0, 3, 1, 2, 4)
            news += [k, v]
            # A group's rows against its prefix at once, as one matrix product per key/value head.
            sp = torch.matmul(q.reshape(g_count, kvh, r * g * t, hd), pk.transpose(-1, -2)) * attn.scaling + pmask
            sp = sp.reshape(g_count, kvh, r, g * t, p_len)
            ss = torch.matmul(q, sk.transpose(-1, -2)) * attn.scaling + smask
            sn = torch.matmul(q, k.transpose(-1, -2)) * attn.scaling + causal
            probs = torch.softmax(torch.cat([sp, ss, sn], dim=-1), dim=-1)
            pp, ps, pn = probs[..., :p_len], probs[..., p_len : p_len + s_len], probs[..., p_len + s_len :]
            op = torch.matmul(pp.reshape(g_count, kvh, r * g * t, p_len), pv).reshape(g_count, kvh, r, g * t, hd)
            o = op + torch.matmul(ps, sv) + torch.matmul(pn, v)
            o = o.reshape(g_count, kvh, r, g, t, hd).permute(0, 2, 4, 1, 3, 5).reshape(n, t, heads * hd)
            x = x + attn.o_proj(o)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        logits = self.model.lm_head(base.norm(x[:, -1, :]))
        return (logits.float(), *news)


def export_decode_onnx(model: PreTrainedModel, out_file: Path) -> Path | None:
    """Traces the decode graph of a model from load_for_export into out_file; None, writing
    nothing, when its architecture has no decode graph."""
    if not has_decode_graph(model.config):
        return None
    c = model.config
    layers = c.num_hidden_layers
    step = _DecodeStep(model)
    groups, rows, t, p, s = 2, 3, 2, 5, 4
    n = groups * rows
    ids = torch.zeros(n, t, dtype=torch.long)
    pos = (torch.arange(t) + p).unsqueeze(0).expand(n, t).contiguous()
    pmask = torch.zeros(groups, p)
    smask = torch.zeros(n, s)
    prefix = [torch.zeros(groups, step.kv_heads, p, step.head_dim) for _ in range(2 * layers)]
    suffix = [torch.zeros(groups, step.kv_heads, rows, s, step.head_dim) for _ in range(2 * layers)]
    kinds = [(i, kind) for i in range(layers) for kind in ('key', 'value')]
    prefix_names = [f'prefix.{i}.{kind}' for i, kind in kinds]
    suffix_names = [f'suffix.{i}.{kind}' for i, kind in kinds]
    new_names = [f'new.{i}.{kind}' for i, kind in kinds]
    axes = {
        'input_ids': {0: 'rows', 1: 'new_tokens'},
        'position_ids': {0: 'rows', 1: 'new_tokens'},
        'logits': {0: 'rows'},
        'prefix_mask': {0: 'groups', 1: 'prefix_length'},
        'suffix_mask': {0: 'rows', 1: 'suffix_length'},
    }
    axes.update({name: {0: 'groups', 2: 'prefix_length'} for name in prefix_names})
    axes.update({name: {0: 'groups', 2: 'group_rows', 3: 'suffix_length'} for name in suffix_names})
    axes.update({name: {0: 'groups', 2: 'group_rows', 3: 'new_tokens'} for name in new_names})
    # Shape arithmetic (rows per group) traces as graph ops; the tracer warns about it anyway.
    return trace_to_onnx(
        step,
        (ids, pos, pmask, smask, *prefix, *suffix),
        out_file,
        ['input_ids', 'position_ids', 'prefix_mask', 'suffix_mask', *prefix_names, *suffix_names],
        ['logits', *new_names],
        axes,
    )

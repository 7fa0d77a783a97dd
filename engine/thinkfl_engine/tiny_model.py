"""The tiny decoder-only transformer used on CPU and in CI (Llama-like layout, RoPE, GQA).

Its forward takes explicit position ids, a [B, P+T] attention mask and an optional key/value
cache, so the same module trains and exports to ONNX with the Hugging Face optimum KV-cache
signature. Initialisation makes copying easy (see shared notes/tiny-model.md): value and
output projections start near the identity and token embeddings have std ~0.3.
"""
import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

MODEL_TYPE = 'thinkfl-tiny'
KV = Tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class TinyConfig:
    vocab_size: int
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    head_dim: int = 64
    intermediate_size: int = 512
    max_position_embeddings: int = 8192
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    embedding_std: float = 0.3
    bos_token_id: Optional[int] = None
    eos_token_id: Optional[int] = None
    pad_token_id: Optional[int] = None

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError('num_attention_heads must be a multiple of num_key_value_heads')
        if self.head_dim % 2:
            raise ValueError('head_dim must be even (RoPE rotates pairs)')

    def to_json(self) -> Dict[str, Any]:
        return {'model_type': MODEL_TYPE, 'architectures': ['ThinkflTinyForCausalLM'],
                'tie_word_embeddings': False, **asdict(self)}

    @staticmethod
    def from_json(raw: Dict[str, Any]) -> 'TinyConfig':
        if raw.get('model_type') != MODEL_TYPE:
            raise ValueError(f"config.json: model_type is {raw.get('model_type')!r}, expected {MODEL_TYPE!r}")
        known = {f.name for f in fields(TinyConfig)}
        return TinyConfig(**{k: v for k, v in raw.items() if k in known})


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Statistics in float32 even under low precision; no casts at all in float32 (cleaner ONNX graph).
        h = x if x.dtype in (torch.float32, torch.float64) else x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.to(x.dtype) * self.weight if h.dtype != x.dtype else h * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, self.heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, self.kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, self.kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * c.head_dim, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, allowed: torch.Tensor,
                past: Optional[KV]) -> Tuple[torch.Tensor, KV]:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past is not None:
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
        group = self.heads // self.kv_heads
        s = k.shape[2]
        kh = k[:, :, None].expand(b, self.kv_heads, group, s, self.head_dim).reshape(b, self.heads, s, self.head_dim)
        vh = v[:, :, None].expand(b, self.kv_heads, group, s, self.head_dim).reshape(b, self.heads, s, self.head_dim)
        scores = torch.matmul(q, kh.transpose(-1, -2)) / math.sqrt(self.head_dim)
        # A finite fill keeps fully masked rows (padding queries) uniform instead of NaN.
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        out = torch.matmul(torch.softmax(scores, dim=-1), vh)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)), (k, v)


class MLP(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, allowed, past):
        h, present = self.self_attn(self.input_layernorm(x), cos, sin, allowed, past)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), present


class Backbone(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class TinyCausalLM(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.config = config
        self.model = Backbone(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, config.head_dim, 2).float() / config.head_dim))
        self.register_buffer('inv_freq', inv_freq, persistent=False)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None,
                past: Optional[List[KV]] = None) -> Tuple[torch.Tensor, List[KV]]:
        """logits [B, T, V] and the per-layer (key, value) cache [B, kv_heads, P+T, head_dim]."""
        b, t = input_ids.shape
        p = past[0][0].shape[2] if past else 0
        if position_ids is None:
            position_ids = (torch.arange(t, device=input_ids.device) + p).unsqueeze(0).expand(b, t)
        x = self.model.embed_tokens(input_ids)
        freqs = position_ids.unsqueeze(-1).float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)
        cos, sin = emb.cos(), emb.sin()
        if x.dtype != cos.dtype:
            cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        key_index = torch.arange(p + t, device=input_ids.device)
        query_index = torch.arange(t, device=input_ids.device) + p
        allowed = (key_index.unsqueeze(0) <= query_index.unsqueeze(1))[None, None]
        if attention_mask is not None:
            allowed = allowed & attention_mask[:, None, None, :].bool()
        presents: List[KV] = []
        for i, layer in enumerate(self.model.layers):
            x, present = layer(x, cos, sin, allowed, past[i] if past else None)
            presents.append(present)
        return self.lm_head(self.model.norm(x)), presents


def init_weights(model: TinyCausalLM, seed: int) -> None:
    """Random init in place; deterministic for a seed."""
    c = model.config
    g = torch.Generator().manual_seed(seed)

    def normal(w: torch.Tensor, std: float) -> None:
        with torch.no_grad():
            w.copy_(torch.randn(w.shape, generator=g) * std)

    def near_identity(w: torch.Tensor) -> None:
        with torch.no_grad():
            w.copy_(torch.eye(*w.shape) + torch.randn(w.shape, generator=g) * 0.02)

    normal(model.model.embed_tokens.weight, c.embedding_std)
    for layer in model.model.layers:
        a = layer.self_attn
        normal(a.q_proj.weight, c.hidden_size ** -0.5)
        normal(a.k_proj.weight, c.hidden_size ** -0.5)
        near_identity(a.v_proj.weight)
        near_identity(a.o_proj.weight)
        normal(layer.mlp.gate_proj.weight, 0.02)
        normal(layer.mlp.up_proj.weight, 0.02)
        normal(layer.mlp.down_proj.weight, 0.02 / math.sqrt(2 * c.num_hidden_layers))
    normal(model.lm_head.weight, 0.02)

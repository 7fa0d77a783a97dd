"""Gradient checks (float64 finite differences vs autograd) of the GRPO and SFT losses.

Checked twice: with respect to the log-probabilities directly, for every loss variant, and
with respect to a tiny Llama's final hidden states and output head, through the same chunked
token_logprobs path the GRPO step uses (a chunk smaller than the batch, so chunking and its
checkpointing are checked).
"""

from typing import Any, Dict, List

import torch

from .grpo_loss import LossSettings, Normalizers, grpo_loss, sft_loss
from .logprobs import token_logprobs
from .tiny_model import create_tiny_model

VARIANTS: Dict[str, Dict[str, Any]] = {
    'token-mean': {},
    'seq-mean-token-mean': {'aggregation': 'seq-mean-token-mean'},
    'dr-grpo': {'aggregation': 'seq-mean-token-sum-norm', 'norm_length': 7},
    'dual-clip': {'dual_clip': 1.5},
    'gspo': {'ratio_level': 'sequence', 'aggregation': 'seq-mean-token-mean'},
    'kl-k1': {'kl_coef': 0.3, 'kl_estimator': 'k1'},
    'kl-k2': {'kl_coef': 0.3, 'kl_estimator': 'k2'},
    'kl-k3': {'kl_coef': 0.3, 'kl_estimator': 'k3'},
}


def _check(name: str, fn, inputs) -> Dict[str, Any]:
    try:
        ok = torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)
        return {'name': name, 'ok': bool(ok)}
    except RuntimeError as e:
        return {'name': name, 'ok': False, 'error': str(e).splitlines()[0]}


def _grpo_checks(
    prefix: str, variants: Dict[str, Dict[str, Any]], logp, old_ref, batch, inputs
) -> List[Dict[str, Any]]:
    """One check of the GRPO loss per variant, its log-probabilities `logp(*inputs)`; the reference only where KL is on."""
    old, ref = old_ref
    mask, adv, n = batch
    checks = []
    for name, raw in variants.items():
        s = LossSettings.from_json(raw)
        r = ref if s.kl_coef else None
        checks.append(
            _check(
                f'{prefix}/{name}', lambda *ps, s=s, r=r: grpo_loss(logp(*ps), old, r, mask, adv, s, n)['loss'], inputs
            )
        )
    return checks


class _Head(torch.nn.Module):
    """An output projection whose weight is the tensor under check (not a parameter of its own)."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = weight

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(h, self.weight)


def run_gradcheck(seed: int = 0) -> Dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    d = torch.float64
    b, t, vocab = 3, 6, 11
    ids = torch.randint(0, vocab, (b, t), generator=g)
    mask = torch.tensor([[0, 1, 1, 1, 0, 1], [0, 0, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0]], dtype=d)
    adv = torch.tensor([0.8, -1.2, 0.4], dtype=d)
    n = Normalizers.of(mask)
    logp0 = -torch.rand((b, t), generator=g, dtype=d) * 2
    old = logp0 + torch.randn((b, t), generator=g, dtype=d) * 0.3
    ref = logp0 + torch.randn((b, t), generator=g, dtype=d) * 0.3
    batch = (mask, adv, n)
    results = _grpo_checks('loss', VARIANTS, lambda lp: lp, (old, ref), batch, (logp0.clone().requires_grad_(True),))

    # transformers' RMSNorm computes in float32 even for float64 weights, so finite differences through
    # the backbone only see float32 rounding: the check starts at its final hidden states and covers
    # the engine's own part, the chunked output head (a chunk smaller than the batch) and the losses.
    model = create_tiny_model(
        {
            'vocab_size': vocab,
            'hidden_size': 8,
            'num_hidden_layers': 2,
            'num_attention_heads': 2,
            'num_key_value_heads': 1,
            'head_dim': 4,
            'intermediate_size': 12,
        },
        seed,
    ).to(d)
    with torch.no_grad():
        hidden = model.model(ids).last_hidden_state
    params = (hidden.detach().clone().requires_grad_(True), model.lm_head.weight.detach().clone().requires_grad_(True))

    def model_logp(h, w):
        return token_logprobs(h, _Head(w), ids, chunk=4)[0]

    with torch.no_grad():
        base = model_logp(*params)
    model_old = base + torch.randn((b, t), generator=g, dtype=d) * 0.1
    model_ref = base + torch.randn((b, t), generator=g, dtype=d) * 0.1
    model_variants = {
        'token-mean-dual-clip-k3': {**VARIANTS['dual-clip'], **VARIANTS['kl-k3']},
        'gspo-k2': {**VARIANTS['gspo'], **VARIANTS['kl-k2']},
    }
    results += _grpo_checks('model/grpo', model_variants, model_logp, (model_old, model_ref), batch, params)
    results.append(_check('model/sft', lambda *ps: sft_loss(model_logp(*ps), mask, n), params))
    return {'ok': all(r['ok'] for r in results), 'checks': results, 'model_parameters': sum(p.numel() for p in params)}

"""GRPO / GSPO policy loss on padded [B, T] tensors: the one place the engine's loss math lives.

Everything is aligned with the input token ids: position t holds log p(x_t | x_<t) and the
generated-token mask says which positions count. Aggregations divide by normalizers computed
once from the whole batch, so a batch split into micro-batches sums to the same loss.
Each knob is documented (meaning, default, equation) in the zod schema of the same names,
packages/trainer-ctl/src/algo/core/loss-settings.ts, which protocol.schema.json is generated from.
"""

from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch


@dataclass(frozen=True)
class LossSettings:
    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: Optional[float] = None
    kl_coef: float = 0.0
    kl_estimator: str = 'k3'
    aggregation: str = 'token-mean'
    ratio_level: str = 'token'
    norm_length: Optional[int] = None

    @staticmethod
    def from_json(raw: Optional[Dict[str, Any]]) -> 'LossSettings':
        """Settings as the request carries them; the protocol schema (protocol.py) has checked them
        (values, and Dr.GRPO's norm_length and GSPO's per-sequence aggregation)."""
        return LossSettings(**(raw or {}))


@dataclass(frozen=True)
class Normalizers:
    """Denominators of the aggregations, taken from the full batch (not a micro-batch).

    `sequences` counts only rows with at least one generated token: a row without one adds
    nothing to any sum, so it must not dilute a mean either (Dr.GRPO's B included).
    """

    tokens: float
    sequences: float

    @staticmethod
    def of(mask: torch.Tensor) -> 'Normalizers':
        per_seq = mask.sum(-1)
        return Normalizers(
            tokens=max(float(per_seq.sum()), 1.0),
            sequences=max(float((per_seq > 0).sum()), 1.0),
        )


def aggregate(x: torch.Tensor, mask: torch.Tensor, s: LossSettings, n: Normalizers) -> torch.Tensor:
    masked = x * mask
    if s.aggregation == 'token-mean':
        return masked.sum() / n.tokens
    if s.aggregation == 'seq-mean-token-mean':
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1)).sum() / n.sequences
    assert s.norm_length is not None  # from_json requires it for seq-mean-token-sum-norm
    return masked.sum() / (n.sequences * float(s.norm_length))


def kl_estimate(logp: torch.Tensor, ref: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) on tokens sampled from pi (Schulman's k1/k2/k3)."""
    d = logp - ref
    if estimator == 'k1':
        return d
    if estimator == 'k2':
        return 0.5 * d * d
    return torch.exp(-d) + d - 1.0


def policy_ratio(logp: torch.Tensor, old: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    log_ratio = (logp - old) * mask
    if level == 'token':
        return torch.exp(log_ratio)
    # GSPO: the length-normalised sequence likelihood ratio, shared by all tokens of a sequence.
    seq = log_ratio.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)
    return torch.exp(seq).expand_as(logp)


def grpo_loss(
    logp: torch.Tensor,
    old: torch.Tensor,
    ref: Optional[torch.Tensor],
    mask: torch.Tensor,
    adv: torch.Tensor,
    s: LossSettings,
    n: Normalizers,
) -> Dict[str, torch.Tensor]:
    """Loss and metrics; `loss` carries the gradient, the metrics are detached."""
    mask = mask.to(logp.dtype)
    a = adv.to(logp.dtype).unsqueeze(-1)
    ratio = policy_ratio(logp, old, mask, s.ratio_level)
    unclipped = -a * ratio
    clipped = -a * torch.clamp(ratio, 1.0 - s.eps_low, 1.0 + s.eps_high)
    pg = torch.maximum(unclipped, clipped)
    clip_frac = aggregate_token_mean((clipped > unclipped).to(logp.dtype), mask, n)
    ratio_mean = aggregate_token_mean(ratio.detach(), mask, n)
    dual_frac = torch.zeros((), dtype=logp.dtype, device=logp.device)
    if s.dual_clip is not None:
        bound = -a * s.dual_clip
        dual_active = (a < 0) & (bound < pg)
        dual_frac = aggregate_token_mean(dual_active.to(logp.dtype), mask, n)
        pg = torch.where(a < 0, torch.minimum(pg, bound), pg)
    pg_loss = aggregate(pg, mask, s, n)
    if s.kl_coef != 0.0:
        if ref is None:
            raise ValueError('kl_coef > 0 needs reference log-probabilities')
        kl_tok = kl_estimate(logp, ref, s.kl_estimator)
        kl_loss = s.kl_coef * aggregate(kl_tok, mask, s, n)
        kl = aggregate_token_mean(kl_tok.detach(), mask, n)
    else:
        kl_loss = torch.zeros((), dtype=logp.dtype, device=logp.device)
        kl = kl_loss
    return {
        'loss': pg_loss + kl_loss,
        'pg_loss': pg_loss.detach(),
        'kl_loss': kl_loss.detach(),
        'kl': kl,
        'clip_fraction': clip_frac,
        'ratio_mean': ratio_mean,
        'dual_clip_fraction': dual_frac,
    }


def aggregate_token_mean(x: torch.Tensor, mask: torch.Tensor, n: Normalizers) -> torch.Tensor:
    return (x * mask).sum() / n.tokens


def sft_loss(logp: torch.Tensor, mask: torch.Tensor, n: Normalizers) -> torch.Tensor:
    """Cross-entropy on generated tokens only: token-mean of -log p over the mask."""
    return aggregate_token_mean(-logp, mask.to(logp.dtype), n)

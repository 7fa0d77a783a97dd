"""Per-token log-probabilities (and entropy) from final hidden states, never holding full-vocab logits.

The output head is applied to `chunk` token positions at a time; under autograd each chunk is
checkpointed, so backward recomputes its logits instead of keeping them. Peak memory for the
head is a few chunk x vocab float32 buffers, whatever the batch (logits, the softmax cross-entropy
keeps, their gradient; the entropy adds two): measured bounds are in the engine-logprob-memory test.
"""

from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from .decoder import decoder_hidden_at, query_positions, selective

DEFAULT_CHUNK = 1024


def _chunk(
    h: torch.Tensor, y: torch.Tensor, head: nn.Module, temperature: Optional[torch.Tensor], entropy: bool
) -> torch.Tensor:
    # The head is called as a module, so DeepSpeed ZeRO-3 gathers its partitioned weight for each chunk.
    logits = head(h)
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    if temperature is not None:
        logits = logits / temperature.to(logits.dtype)[:, None]
    # cross_entropy's fused backward (softmax - onehot) needs fewer vocab-wide buffers than log_softmax + gather.
    logp = -F.cross_entropy(logits, y, reduction='none')
    if not entropy:
        return logp[:, None]
    all_logp = torch.log_softmax(logits, dim=-1)
    return torch.stack((logp, -(all_logp.exp() * all_logp).sum(-1)), dim=-1)


def _head_logprobs(
    h: torch.Tensor, y: torch.Tensor, head: nn.Module, temps: Optional[torch.Tensor], chunk: int, entropy: bool
) -> torch.Tensor:
    """[N, 1 or 2]: log p(y) and, when asked, the entropy at N final hidden states, `chunk` at a time."""
    grad = torch.is_grad_enabled() and (h.requires_grad or any(p.requires_grad for p in head.parameters()))
    parts = []
    for s in range(0, h.shape[0], chunk):
        args = (h[s : s + chunk], y[s : s + chunk], head, None if temps is None else temps[s : s + chunk], entropy)
        parts.append(checkpoint(_chunk, *args, use_reentrant=False) if grad else _chunk(*args))
    return torch.cat(parts) if parts else h.new_zeros(0, 2 if entropy else 1, dtype=torch.float32)


def token_logprobs(
    hidden: torch.Tensor,
    head: nn.Module,
    ids: torch.Tensor,
    temperature: Union[float, Sequence[float]] = 1.0,
    chunk: int = DEFAULT_CHUNK,
    entropy: bool = False,
    needed: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """[B, T] log p_T(ids[t] | ids[<t]) under softmax(logits / T) and, when asked, [B, T] entropy of
    that distribution; at least float32.

    hidden: [B, T, H] final hidden states; head: the output projection module; temperature: one
    number or one per row, the temperature each sequence was sampled at (before any top-p
    truncation), so that on-policy importance ratios are exactly 1. Position 0 has no prediction
    and is 0 in both. needed: [B, T], nonzero where a value is wanted (a loss mask); the head runs
    on those positions only and the others are 0 (but one when none is needed; an SFT or GRPO sample trains on its ~7% generated
    tokens, so most of the head's matmuls, its recomputation and the vocab-wide softmax go).
    """
    if chunk <= 0:
        raise ValueError(f'logprob chunk must be a positive number of tokens, got {chunk}')
    b, t, width = hidden.shape
    h = hidden[:, :-1].reshape(-1, width)
    y = ids[:, 1:].reshape(-1)
    rows = [float(temperature)] * b if isinstance(temperature, (int, float)) else [float(x) for x in temperature]
    if len(rows) != b:
        raise ValueError(f'temperature: {len(rows)} values for {b} sequences')
    temps = None
    if any(x != 1.0 for x in rows):
        temps = torch.tensor(rows, dtype=torch.float32, device=hidden.device).repeat_interleave(t - 1)
    at = None
    if needed is not None:
        if needed.shape != ids.shape:
            raise ValueError(f'needed: shape {tuple(needed.shape)}, expected that of the ids {tuple(ids.shape)}')
        at = needed[:, 1:].reshape(-1).nonzero().squeeze(-1)
        if at.numel() == 0:
            # One position all the same, so that the result depends on the weights (a loss of 0 still backpropagates).
            at = at.new_zeros(1)
        h, y = h[at], y[at]
        temps = None if temps is None else temps[at]
    values = _head_logprobs(h, y, head, temps, chunk, entropy)
    k = values.shape[1]
    if at is not None:
        values = values.new_zeros(b * (t - 1), k).index_copy(0, at, values)
    out = values.view(b, t - 1, k)
    out = torch.cat((torch.zeros_like(out[:, :1]), out), dim=1)
    return out[..., 0], (out[..., 1] if entropy else None)


def model_logprobs(
    model: nn.Module,
    ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: Sequence[float],
    chunk: int,
    needed: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """[B, T] token log-probabilities of a transformers causal LM: its decoder's final hidden states, then its
    head in chunks (at the `needed` positions only, when given; 0 elsewhere). With `needed`, the decoder's
    last layer too runs at those positions only where it can (decoder.py)."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    if needed is None or not selective(decoder):
        hidden = decoder(input_ids=ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        return token_logprobs(hidden, head, ids, temperature, chunk, needed=needed)[0]
    if needed.shape != ids.shape:
        raise ValueError(f'needed: shape {tuple(needed.shape)}, expected that of the ids {tuple(ids.shape)}')
    if len(temperature) != ids.shape[0]:
        raise ValueError(f'temperature: {len(temperature)} values for {ids.shape[0]} sequences')
    at = query_positions(needed)
    rows, cols = at[:, 0], at[:, 1]
    temps = None
    if any(float(x) != 1.0 for x in temperature):
        temps = torch.tensor([float(x) for x in temperature], dtype=torch.float32, device=ids.device)[rows]
    values = _head_logprobs(
        decoder_hidden_at(decoder, ids, attention_mask, at), ids[rows, cols + 1], head, temps, chunk, False
    )
    return values.new_zeros(ids.shape).index_put((rows, cols + 1), values[:, 0])


class LogprobModel(nn.Module):
    """A causal LM as one module whose forward is its [B, T] token log-probabilities.

    DeepSpeed's engine wraps this module, so that each training forward runs through the engine:
    ZeRO-3 accumulates the gradients of a request's micro-batches only when the engine's forward
    ran before each backward (it clears the optimizer's backward-seen flag there), and the
    engine's forward must not compute the full-vocabulary logits that the model's own forward would.
    """

    def __init__(self, model: nn.Module, chunk: int):
        super().__init__()
        self.model = model
        self.chunk = chunk

    def forward(
        self,
        ids: torch.Tensor,
        attention_mask: torch.Tensor,
        temperature: List[float],
        needed: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        return model_logprobs(self.model, ids, attention_mask, temperature, self.chunk, needed)

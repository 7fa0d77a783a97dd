"""Ragged protocol arrays <-> padded tensors, and per-token log-probabilities from logits."""
import math
from typing import Any, List, Optional, Sequence, Union

import torch
import torch.nn.functional as F


def check_ragged(name: str, rows: Sequence[Sequence[float]], lengths: List[int]) -> None:
    if len(rows) != len(lengths):
        raise ValueError(f'{name}: {len(rows)} sequences, expected {len(lengths)}')
    for i, (row, n) in enumerate(zip(rows, lengths)):
        if len(row) != n:
            raise ValueError(f'{name}[{i}]: {len(row)} values, expected {n} (one per token id)')


def pad(rows: Sequence[Sequence[float]], dtype: torch.dtype, device: torch.device, value: float = 0) -> torch.Tensor:
    """Right-pads ragged rows into [B, T_max]."""
    width = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), width), value, dtype=dtype)
    for i, r in enumerate(rows):
        if len(r):
            out[i, :len(r)] = torch.tensor(r, dtype=dtype)
    return out.to(device)


def unpad(x: torch.Tensor, lengths: List[int]) -> List[List[float]]:
    rows = x.detach().to('cpu', torch.float64).tolist()
    return [row[:n] for row, n in zip(rows, lengths)]


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: Union[float, torch.Tensor] = 1.0) -> torch.Tensor:
    """[B, T] log p_T(ids[t] | ids[<t]) under the temperature-scaled distribution softmax(logits / T),
    at least float32; `temperature` is one number or one per row. Position 0 has no prediction and is 0.

    This is the distribution the rollout side sampled from (before any top-p truncation), so
    on-policy importance ratios are exactly 1.
    """
    head = logits[:, :-1]
    head = head if head.dtype in (torch.float32, torch.float64) else head.float()
    t = torch.as_tensor(temperature, dtype=head.dtype, device=head.device)
    scaled = head / (t.view(-1, 1, 1) if t.dim() else t)
    lp = -F.cross_entropy(scaled.reshape(-1, scaled.shape[-1]), ids[:, 1:].reshape(-1), reduction='none')
    lp = lp.view(ids.shape[0], ids.shape[1] - 1)
    return torch.cat((torch.zeros_like(lp[:, :1]), lp), dim=1)


def temperatures(raw: Any, n: int) -> List[float]:
    """A sampling temperature per sequence from one number or a list of n; each finite and > 0."""
    values = raw if isinstance(raw, list) else [raw] * n
    if len(values) != n:
        raise ValueError(f'temperature: {len(values)} values, expected one per sequence ({n})')
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f'temperature[{i}]: need a finite number > 0 (the sampling temperature of the sequence), '
                             f'got {v!r}')
    return [float(v) for v in values]


def micro_batches(n: int, size: Optional[int]) -> List[range]:
    step = size if size and size > 0 else max(n, 1)
    return [range(i, min(i + step, n)) for i in range(0, n, step)]

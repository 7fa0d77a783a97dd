"""Ragged protocol arrays <-> padded tensors, and per-token log-probabilities from logits."""
from typing import List, Optional, Sequence

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


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """[B, T] log p(ids[t] | ids[<t]), at least float32; position 0 has no prediction and is 0."""
    head = logits[:, :-1]
    scaled = (head if head.dtype in (torch.float32, torch.float64) else head.float()) / temperature
    lp = -F.cross_entropy(scaled.reshape(-1, scaled.shape[-1]), ids[:, 1:].reshape(-1), reduction='none')
    lp = lp.view(ids.shape[0], ids.shape[1] - 1)
    return torch.cat((torch.zeros_like(lp[:, :1]), lp), dim=1)


def micro_batches(n: int, size: Optional[int]) -> List[range]:
    step = size if size and size > 0 else max(n, 1)
    return [range(i, min(i + step, n)) for i in range(0, n, step)]

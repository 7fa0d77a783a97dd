"""Ragged protocol arrays <-> padded tensors, per-sequence sampling temperatures, and micro-batches."""

import math
from typing import Any, List, Optional, Sequence

import torch


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
            out[i, : len(r)] = torch.tensor(r, dtype=dtype)
    return out.to(device)


def unpad(x: torch.Tensor, lengths: List[int]) -> List[List[float]]:
    rows = x.detach().to('cpu', torch.float64).tolist()
    return [row[:n] for row, n in zip(rows, lengths)]


def temperatures(raw: Any, n: int) -> List[float]:
    """A sampling temperature per sequence from one number or a list of n; each finite and > 0."""
    values = raw if isinstance(raw, list) else [raw] * n
    if len(values) != n:
        raise ValueError(f'temperature: {len(values)} values, expected one per sequence ({n})')
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(
                f'temperature[{i}]: need a finite number > 0 (the sampling temperature of the sequence), got {v!r}'
            )
    return [float(v) for v in values]


def micro_batches(lengths: List[int], size: Optional[int], tokens: Optional[int] = None) -> List[range]:
    """Consecutive sequences, at most `size` of them and (padded to the longest) at most `tokens` tokens.

    A sequence longer than the token budget gets a micro-batch of its own.
    """
    parts: List[range] = []
    start, longest = 0, 0
    for i, n in enumerate(lengths):
        longest_with = max(longest, n)
        count = i - start + 1
        if i > start and (
            (size and size > 0 and count > size) or (tokens and tokens > 0 and longest_with * count > tokens)
        ):
            parts.append(range(start, i))
            start, longest_with = i, n
        longest = longest_with
    if lengths:
        parts.append(range(start, len(lengths)))
    return parts

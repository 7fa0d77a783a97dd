"""Compute precision and threads of the engine.

Parameters and optimizer state are float32 master weights (float64 when asked for, in tests);
a lower precision is only the compute precision of forward and backward (torch.autocast), so
a small update is not rounded away in the weights. `auto` picks bfloat16 only where the device
runs it natively: on CPU that needs the avx512_bf16 or amx_bf16 instructions (without them bf16
is emulated, 17x slower than float32 on an AVX2 EPYC; with avx512_bf16 an SFT step of the tiny
model is faster in bf16, scripts/bench/sft-precision.ts); on CUDA it needs bf16 support. The
choice follows the CPU's flags, not a timing, so that it is the same at every (re)start: a
short timing on a loaded machine picked float32 where the real step was 7x faster in bf16.
"""
import os
from pathlib import Path
from typing import Optional, Tuple

import torch

from .models import parse_dtype

BF16_CPU_FLAGS = ('avx512_bf16', 'amx_bf16')


def cpu_flags() -> set:
    info = Path('/proc/cpuinfo')
    if not info.is_file():
        return set()
    for line in info.read_text().splitlines():
        if line.startswith('flags'):
            return set(line.split(':', 1)[1].split())
    return set()


def auto_cpu() -> Tuple[torch.dtype, str]:
    native = [f for f in BF16_CPU_FLAGS if f in cpu_flags()]
    if not native:
        return torch.float32, f'float32: this CPU has none of {list(BF16_CPU_FLAGS)}, bfloat16 would be emulated'
    return torch.bfloat16, f'bfloat16: native on this CPU ({", ".join(native)})'


def resolve_compute(name: str, device: torch.device) -> Tuple[torch.dtype, str]:
    """The compute dtype for a requested name ('auto' or a dtype) and why it was chosen."""
    if name == 'auto':
        if device.type == 'cuda':
            if torch.cuda.is_bf16_supported():
                return torch.bfloat16, 'bfloat16: supported by this GPU'
            return torch.float32, 'float32: this GPU has no bfloat16'
        return auto_cpu() if device.type == 'cpu' else (torch.float32, f'float32: no auto rule for {device.type}')
    dtype = parse_dtype(name)
    if dtype == torch.float16 and device.type == 'cpu':
        raise ValueError('float16 compute is for CUDA; on CPU use bfloat16 or auto')
    return dtype, f'{name}: as configured'


def master_dtype(compute: torch.dtype) -> torch.dtype:
    return torch.float64 if compute == torch.float64 else torch.float32


def set_threads(requested: Optional[int]) -> int:
    """Uses the cores this process may run on (its CPU affinity) unless a count is given."""
    n = int(requested) if requested else len(os.sched_getaffinity(0))
    if n < 1:
        raise ValueError(f'threads must be >= 1, got {n}')
    torch.set_num_threads(n)
    return n

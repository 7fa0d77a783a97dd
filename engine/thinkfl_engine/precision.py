"""Compute precision and threads of the engine.

Parameters and optimizer state are float32 master weights (float64 when asked for, in tests);
a lower precision is only the compute precision of forward and backward (torch.autocast), so
a small update is not rounded away in the weights. `auto` picks bfloat16 only where the device
runs it natively faster than float32: on CPU that needs the avx512_bf16 or amx_bf16
instructions (without them bf16 is emulated, ~17x slower on an AVX2 EPYC) and a short
measurement that confirms the speed-up; on CUDA it needs bf16 support.
"""
import os
import time
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


def _step_seconds(dtype: Optional[torch.dtype], reps: int = 5) -> float:
    """Best time of a small MLP forward+backward (the tiny model's shapes), with autocast at dtype or none."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.SiLU(), torch.nn.Linear(256, 128))
    x = torch.randn(512, 128)
    best = float('inf')
    for _ in range(reps):
        start = time.perf_counter()
        with torch.autocast('cpu', dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            y = net(x).float().square().mean()
        y.backward()
        best = min(best, time.perf_counter() - start)
    return best


def auto_cpu() -> Tuple[torch.dtype, str]:
    flags = cpu_flags()
    native = [f for f in BF16_CPU_FLAGS if f in flags]
    if not native:
        return torch.float32, f'float32: this CPU has none of {list(BF16_CPU_FLAGS)}, bfloat16 would be emulated'
    _step_seconds(None, 1), _step_seconds(torch.bfloat16, 1)
    fp32, bf16 = _step_seconds(None), _step_seconds(torch.bfloat16)
    if bf16 < fp32:
        return torch.bfloat16, f'bfloat16: native ({", ".join(native)}), measured {fp32 / bf16:.1f}x float32'
    return torch.float32, f'float32: bfloat16 is native ({", ".join(native)}) but measured {fp32 / bf16:.2f}x float32'


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

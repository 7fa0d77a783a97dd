"""Compute precision and threads of the engine.

Parameters and optimizer state are float32 master weights (float64 when asked for, in tests);
a lower precision is only the compute precision of forward and backward (torch.autocast), so
a small update is not rounded away in the weights. `auto` on CPU times a few training passes
(forward and backward) of the loaded model in float32 and in bfloat16, interleaved, and takes
the faster. CPU flags do not decide it: an Intel Xeon with avx512_bf16 but no AMX ran the tiny
model's SFT step 0.68x as fast in bf16 (issue 29), and an AVX2 EPYC emulates bf16 at 1/17 the
speed. The probe repeats one length, so it times bfloat16's oneDNN kernels built once: on an AMX
Xeon it found the two a tie while the job's updates, each of a new length, ran 0.73x as fast in
bf16 (experiment 28, where float32's faster job also had worse validity in one seed of six, so
the probe was left as it is). The measurement is kept in a cache file keyed by the CPU model, its
flags, the torch version, any kernel-choosing environment variable, the thread count and the
model's shape, so that every (re)start of a run on that machine takes the same decision, and a
loaded machine pays for the timing once. On CUDA `auto` is bfloat16 where the GPU supports it.
"""

import hashlib
import json
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from .models import parse_dtype

log = logging.getLogger('thinkfl_engine')

# The precisions `auto` chooses between on CPU, by name (the cache and the timings use these names).
CANDIDATES = {'float32': torch.float32, 'bfloat16': torch.bfloat16}


# Environment variables that change which kernels torch runs, whatever the CPU flags say: an ISA cap
# (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 runs an AMX Xeon's bfloat16 as one without AMX does, experiment
# 29) or float32 computed in a lower precision.
KERNEL_ENV = (
    'ONEDNN_MAX_CPU_ISA',
    'DNNL_MAX_CPU_ISA',
    'ATEN_CPU_CAPABILITY',
    'MKL_ENABLE_INSTRUCTIONS',
    'ONEDNN_DEFAULT_FPMATH_MODE',
)


def cpu_identity() -> Dict[str, Any]:
    """What lscpu reports as the model name and flags (both from /proc/cpuinfo), with the torch version and
    any KERNEL_ENV set (only when set, so that the keys of a plain environment stay as they were)."""
    info = Path('/proc/cpuinfo')
    text = info.read_text() if info.is_file() else ''
    field: Dict[str, str] = {}
    for line in text.splitlines():
        k, _, v = line.partition(':')
        field.setdefault(k.strip(), v.strip())
    identity: Dict[str, Any] = {
        'cpu_model': field.get('model name') or platform.processor() or platform.machine(),
        'cpu_flags': sorted(field.get('flags', '').split()),
        'torch': torch.__version__,
    }
    kernel_env = {k: os.environ[k] for k in KERNEL_ENV if os.environ.get(k)}
    if kernel_env:
        identity['kernel_env'] = kernel_env
    return identity


def measure(
    step: Callable[[torch.dtype], None], reps: int, clock: Callable[[], float] = time.perf_counter
) -> Dict[str, float]:
    """The fastest of `reps` calls of step(dtype) per candidate in milliseconds, after one warm-up call each.

    The candidates alternate, so that a change of machine load hits both alike; the minimum, because
    other jobs on the cores only ever add time (on 2 cores at load 13 a median of 3 flipped between
    0.74x and 1.09x bf16/fp32 from run to run)."""
    if reps < 1:
        raise ValueError(f'autocast probe: reps must be >= 1, got {reps}')
    for dtype in CANDIDATES.values():
        step(dtype)
    ms: Dict[str, list] = {name: [] for name in CANDIDATES}
    for _ in range(reps):
        for name, dtype in CANDIDATES.items():
            t0 = clock()
            step(dtype)
            ms[name].append((clock() - t0) * 1000.0)
    return {name: min(v) for name, v in ms.items()}


def decide(ms: Dict[str, float]) -> torch.dtype:
    """bfloat16 only when it measured faster; a tie keeps float32's precision."""
    return torch.bfloat16 if ms['bfloat16'] < ms['float32'] else torch.float32


class AutocastProbe:
    """`auto` on CPU: a measured decision, read from / written to `cache_dir` (None: measure every time).

    shape: what, besides the machine, changes the timing (the model's sizes, LoRA, threads, probe length);
    step: one training pass of the loaded model at a compute dtype.
    """

    def __init__(
        self, cache_dir: Optional[Path], shape: Dict[str, Any], step: Callable[[torch.dtype], None], reps: int
    ):
        self.cache_dir = cache_dir
        # As it reads back from the cache file (tuples become lists), so that the two compare equal.
        self.key = json.loads(json.dumps({**cpu_identity(), 'shape': shape, 'reps': reps}))
        self.step = step
        self.reps = reps

    def file(self) -> Optional[Path]:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:16]
        return self.cache_dir / f'autocast-{digest}.json'

    def cached(self) -> Optional[Dict[str, float]]:
        f = self.file()
        if f is None or not f.is_file():
            return None
        try:
            entry = json.loads(f.read_text())
            ms = {name: float(entry['ms'][name]) for name in CANDIDATES}
        except (ValueError, KeyError, TypeError) as e:
            log.warning('autocast cache %s unreadable (%s): measuring again', f, e)
            return None
        # A digest collision or a hand-edited key is not this machine's measurement.
        return ms if entry.get('key') == self.key else None

    def store(self, ms: Dict[str, float]) -> None:
        f = self.file()
        if f is None:
            return
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f'.{f.name}.{os.getpid()}')
        tmp.write_text(
            json.dumps(
                {
                    'key': self.key,
                    'ms': ms,
                    'choice': str(decide(ms)).replace('torch.', ''),
                    'measured_at': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
                },
                indent=1,
            )
        )
        os.replace(tmp, f)

    def resolve(self) -> Tuple[torch.dtype, str]:
        ms = self.cached()
        source = f'cached in {self.file()}'
        if ms is None:
            ms = measure(self.step, self.reps)
            self.store(ms)
            source = f'measured now{f", cached in {self.file()}" if self.file() else ""}'
        dtype = decide(ms)
        name = str(dtype).replace('torch.', '')
        return dtype, (
            f'{name}: auto, the faster training pass on this CPU ({self.key["cpu_model"]}): '
            f'float32 {ms["float32"]:.1f} ms, bfloat16 {ms["bfloat16"]:.1f} ms ({source})'
        )


def resolve_compute(
    name: str, device: torch.device, probe: Optional[Callable[[], AutocastProbe]] = None
) -> Tuple[torch.dtype, str]:
    """The compute dtype for a requested name ('auto' or a dtype) and why it was chosen.

    probe: makes the CPU measurement `auto` decides by (None: no model to time, float32)."""
    if name == 'auto':
        if device.type == 'cuda':
            if torch.cuda.is_bf16_supported():
                return torch.bfloat16, 'bfloat16: supported by this GPU'
            return torch.float32, 'float32: this GPU has no bfloat16'
        if device.type != 'cpu':
            return torch.float32, f'float32: no auto rule for {device.type}'
        if probe is None:
            return torch.float32, 'float32: auto without a model to time'
        return probe().resolve()
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

"""AdamW's fused kernel against torch's default (foreach) kernels in the engine's SFT step (issue 29
experiment 30): two Trainers of the same model in one process, one per optimizer, step the main job's
own teacher conversations at its learning rate, alternating in blocks (and which goes first) so that a
change of machine load hits both alike; each also times its AdamW step alone (`optimizer.step`). Prints the CPU model, the
load average before and after, per optimizer the median ms per whole step, per AdamW step, and the
ratio to the default's, and the largest weight difference between the two after all steps (rounding:
the fused kernel orders the same operations differently).

    .cache/venv/bin/python scripts/bench/sft-optimizer.py --samples runs/tiny-cpu/teacher-samples.json \
        [--model .cache/models/tiny] [--blocks 8] [--steps 20] [--autocast float32|bfloat16]
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy and the denormal flush)
import torch  # noqa: E402
import transformers  # noqa: E402

from thinkfl_engine.trainer import Trainer  # noqa: E402
from machine import cpu_model, load  # noqa: E402  (scripts/bench/machine.py)

LR = 5.0e-3  # configs/tiny-cpu.yaml, stages.priming.sft.optimizer.lr


def trainer(model_dir: str, autocast: str, fused: bool) -> Trainer:
    t = Trainer(
        {
            'model_dir': model_dir,
            'seed': 0,
            'autocast': autocast,
            'gradient_checkpointing': False,
            'optimizer': {'lr': LR},
        }
    )
    up = t.updater
    if up.fused != fused:
        up.fused = fused
        up.optimizer = up.settings.adamw(up.params, fused=fused)
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', default='.cache/models/tiny', help='the initial tiny model dir')
    ap.add_argument(
        '--samples',
        required=True,
        help="a run's teacher-samples.json (ids, mask per conversation)",
    )
    ap.add_argument(
        '--blocks',
        type=int,
        default=8,
        help='blocks per optimizer, alternating (the first warms up)',
    )
    ap.add_argument('--steps', type=int, default=20, help='SFT steps per block')
    ap.add_argument('--autocast', default='float32', choices=['float32', 'bfloat16'])
    a = ap.parse_args()
    if a.blocks < 2 or a.steps < 1:
        ap.error('--blocks must be >= 2 (the first warms up) and --steps >= 1')
    transformers.utils.logging.disable_progress_bar()
    samples = json.loads(Path(a.samples).read_text())
    print(
        f'CPU: {cpu_model()}; load average {load()}; {len(samples)} conversations, '
        f'mean {statistics.mean(len(s["ids"]) for s in samples):.0f} tokens; {a.blocks} blocks of {a.steps} steps '
        f'per optimizer, alternating, batch 1, {a.autocast}, lr {LR}; torch {torch.__version__}'
    )
    names = ('foreach (default)', 'fused')
    runs = {name: trainer(a.model, a.autocast, name == 'fused') for name in names}
    step_ms = {name: [] for name in names}
    adamw_ms = {name: [] for name in names}
    for block in range(a.blocks):
        # Which goes first alternates too: the second of two back-to-back runs has been the faster here.
        for name in names if block % 2 else names[::-1]:
            t = runs[name]
            opt = t.updater.optimizer
            inner = opt.step
            timed = []

            def step(*args, **kw):
                t0 = time.perf_counter()
                try:
                    return inner(*args, **kw)
                finally:
                    timed.append((time.perf_counter() - t0) * 1000)

            opt.step = step
            for k in range(a.steps):
                s = samples[(block * a.steps + k) % len(samples)]
                t0 = time.perf_counter()
                t.sft_step({'input_ids': [s['ids']], 'mask': [s['mask']], 'lr': LR})
                if block:
                    step_ms[name].append((time.perf_counter() - t0) * 1000)
            opt.step = inner
            if block:
                adamw_ms[name] += timed
    base_step, base_adamw = (
        statistics.median(step_ms[names[0]]),
        statistics.median(adamw_ms[names[0]]),
    )
    for name in names:
        s, o = statistics.median(step_ms[name]), statistics.median(adamw_ms[name])
        print(f'{name:18s} step {s:7.1f} ms ({s / base_step:4.2f}x)   AdamW {o:6.2f} ms ({o / base_adamw:4.2f}x)')
    a_w, b_w = (dict(runs[n].policy.module.named_parameters()) for n in names)
    diffs = sorted(((a_w[k] - b_w[k]).abs().max().item(), k) for k in a_w)
    print(
        f'largest weight difference after {a.blocks * a.steps} steps: {diffs[-1][0]:.2e} ({diffs[-1][1]}), '
        f'median over weights {statistics.median(d for d, _ in diffs):.2e}; load average after: {load()}'
    )


if __name__ == '__main__':
    main()

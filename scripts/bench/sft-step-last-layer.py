"""One SFT step of the tiny-cpu model on the main job's own teacher conversations: the decoder's last
layer on every position (its own forward, as before) against the last layer at the loss mask's
positions only (thinkfl_engine/decoder.py), interleaved step by step in this process so that a change
of machine load hits both alike. Both trainers start from the same weights and take the same steps;
the largest difference of their losses is printed (rounding only: the same equations). Prints the CPU
model, the load average before and after, the median ms per step and the ratio.

    .cache/venv/bin/python scripts/bench/sft-step-last-layer.py --samples runs/tiny-cpu/teacher-samples.json [--model .cache/models/tiny] [--rounds 20] [--precision float32]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import transformers  # noqa: E402

from thinkfl_engine import decoder, logprobs  # noqa: E402
from thinkfl_engine.trainer import Trainer  # noqa: E402
from machine import load  # noqa: E402  (scripts/bench/machine.py)
from teacher_steps import add_teacher_args, read_teacher  # noqa: E402  (scripts/bench/teacher_steps.py)


def main() -> None:
    ap = argparse.ArgumentParser()
    add_teacher_args(ap)
    ap.add_argument('--precision', default='float32', choices=['float32', 'bfloat16'])
    a = ap.parse_args()
    transformers.utils.logging.disable_progress_bar()
    samples = read_teacher(a)
    print(f'compute precision {a.precision}')
    variants = [('last layer on every position', lambda d: False), ('last layer at the mask positions', decoder.selective)]
    trainers = [
        Trainer({'model_dir': a.model, 'seed': 0, 'autocast': a.precision, 'gradient_checkpointing': False,
                 'optimizer': {'lr': 1e-4}})
        for _ in variants
    ]
    ms = [[] for _ in variants]
    worst = 0.0
    for r in range(a.rounds + 1):
        s = samples[r % len(samples)]
        losses = []
        for k, ((_, choose), t) in enumerate(zip(variants, trainers)):
            logprobs.selective = choose  # the path model_logprobs takes for this trainer's step
            t0 = time.perf_counter()
            out = t.sft_step({'input_ids': [s['ids']], 'mask': [s['mask']], 'lr': 1e-4})
            if r:  # round 0 warms up
                ms[k].append((time.perf_counter() - t0) * 1000)
            losses.append(out['loss'])
        worst = max(worst, abs(losses[0] - losses[1]))
    base = statistics.median(ms[0])
    for (name, _), xs in zip(variants, ms):
        m = statistics.median(xs)
        print(f'{name:34s} {m:7.1f} ms/step (min {min(xs):6.1f})  {m / base:5.2f}x')
    print(f'largest loss difference over {a.rounds + 1} steps: {worst:.2e}; load average after: {load()}')


if __name__ == '__main__':
    main()

"""One SFT step of the tiny-cpu model on the main job's own teacher conversations: the output head on
every position (as before issue 29) against the head on the loss mask's positions only, each in
float32 and bfloat16 compute, measured in this run with the variants interleaved step by step, so
that a change of machine load hits all alike. Prints the CPU model, the load average before and
after, the median ms per step and the ratio to the first row.

    .cache/venv/bin/python scripts/bench/sft-step-head.py --samples runs/tiny-cpu/teacher-samples.json [--model .cache/models/tiny] [--rounds 20]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import transformers  # noqa: E402

from thinkfl_engine import logprobs  # noqa: E402
from thinkfl_engine.trainer import Trainer  # noqa: E402
from machine import load  # noqa: E402  (scripts/bench/machine.py)
from teacher_steps import add_teacher_args, read_teacher  # noqa: E402  (scripts/bench/teacher_steps.py)


def main() -> None:
    ap = argparse.ArgumentParser()
    add_teacher_args(ap)
    a = ap.parse_args()
    transformers.utils.logging.disable_progress_bar()
    samples = read_teacher(a)
    # The head alone: every variant runs the decoder's last layer on every position (scripts/bench/sft-step-last-layer.py
    # measures running it at the mask's positions).
    logprobs.selective = lambda decoder: False
    variants = [(f'head on all positions, {p}', True, p) for p in ('float32', 'bfloat16')]
    variants += [(f'head on mask positions, {p}', False, p) for p in ('float32', 'bfloat16')]
    trainers = []
    for _, all_positions, precision in variants:
        t = Trainer({'model_dir': a.model, 'seed': 0, 'autocast': precision, 'gradient_checkpointing': False,
                     'optimizer': {'lr': 1e-4}})
        if all_positions:
            t._needed = lambda mask: None  # the pre-issue-29 path: log-probabilities at every position
        trainers.append(t)
    ms = [[] for _ in variants]
    for r in range(a.rounds + 1):
        s = samples[r % len(samples)]
        for k, t in enumerate(trainers):
            t0 = time.perf_counter()
            t.sft_step({'input_ids': [s['ids']], 'mask': [s['mask']], 'lr': 1e-4})
            if r:  # round 0 warms up
                ms[k].append((time.perf_counter() - t0) * 1000)
    base = statistics.median(ms[0])
    for (name, _, _), xs in zip(variants, ms):
        m = statistics.median(xs)
        print(f'{name:38s} {m:7.1f} ms/step (min {min(xs):6.1f})  {m / base:5.2f}x')
    print(f'load average after: {load()}')


if __name__ == '__main__':
    main()

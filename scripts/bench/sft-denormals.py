"""Why the main job's SFT steps get slower as it trains (issue 29): one SFT step of the tiny-cpu model
at its initial weights and at a trained checkpoint's, each with torch's flush of denormal floats off
(the default) and on, on the main job's own teacher conversations, interleaved step by step so that
a change of machine load hits all alike. The learning rate is 0, so the weights stay where they were
loaded. Prints the CPU model, the load average before and after, the median ms per step and the ratio
to the first row, and how many values of the trained model's attention probabilities and logits'
softmax are denormal (nonzero, below float32's smallest normal). Each variant runs in a process of its
own that sets the flush at its start, as the engine does (thinkfl_engine's __init__); the processes
alternate, `--reps` each.

    .cache/venv/bin/python scripts/bench/sft-denormals.py --samples runs/tiny-cpu/teacher-samples.json \
        --trained runs/tiny-cpu/checkpoints/update-000017 [--model .cache/models/tiny] [--rounds 12] [--reps 2] [--autocast float32]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy and the denormal flush)
import torch  # noqa: E402

# A variant's process: its flush, set before it computes anything (off in the parent,
# which counts the denormals).
torch.set_flush_denormal(os.environ.get('THINKFL_BENCH_FLUSH', 'off') == 'on')
import transformers  # noqa: E402

from thinkfl_engine.trainer import Trainer  # noqa: E402
from machine import cpu_model, load  # noqa: E402  (scripts/bench/machine.py)


def denormal_share(model_dir: str, ids: list) -> str:
    """Share of denormal values in the attention probabilities (eager attention, so they exist as a tensor)."""
    m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation='eager', dtype=torch.float32)
    with torch.no_grad():
        out = m(torch.tensor([ids]), output_attentions=True)
    tiny = torch.finfo(torch.float32).tiny
    att = torch.cat([a.flatten() for a in out.attentions])
    probs = torch.softmax(out.logits.float(), -1).flatten()
    share = lambda x: ((x > 0) & (x < tiny)).float().mean().item()  # noqa: E731
    zero = lambda x: (x == 0).float().mean().item()  # noqa: E731
    return (f'attention probabilities denormal {share(att):.4f}, zero {zero(att):.4f}; '
            f'softmax of logits denormal {share(probs):.4f}, zero {zero(probs):.4f}')


def one(model_dir: str, flush: bool, samples: list, rounds: int, autocast: str) -> list:
    """ms per SFT step of `model_dir` in this process, whose flush was set at its start."""
    t = Trainer({'model_dir': model_dir, 'seed': 0, 'autocast': autocast, 'gradient_checkpointing': False,
                 'optimizer': {'lr': 0.0}})
    out = []
    for r in range(rounds + 1):
        s = samples[r % len(samples)]
        t0 = time.perf_counter()
        t.sft_step({'input_ids': [s['ids']], 'mask': [s['mask']], 'lr': 0.0})
        if r:  # round 0 warms up
            out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', default='.cache/models/tiny', help='the initial tiny model dir')
    ap.add_argument('--trained', required=True, help="a checkpoint of the same model after SFT (e.g. a run's update-000017)")
    ap.add_argument('--samples', required=True, help="a run's teacher-samples.json (ids, mask per conversation)")
    ap.add_argument('--rounds', type=int, default=12, help='timed steps per variant and rep')
    ap.add_argument('--reps', type=int, default=2, help='processes per variant, alternating')
    ap.add_argument('--autocast', default='float32', choices=['float32', 'bfloat16'])
    ap.add_argument('--one', help=argparse.SUPPRESS)  # internal: "<model dir>|<on|off>", one variant's process
    a = ap.parse_args()
    samples = json.loads(Path(a.samples).read_text())
    if a.one:
        model_dir, flush = a.one.split('|')
        print(json.dumps(one(model_dir, flush == 'on', samples, a.rounds, a.autocast)))
        return
    transformers.utils.logging.disable_progress_bar()
    print(f'CPU: {cpu_model()}; load average {load()}; {len(samples)} conversations, '
          f'mean {statistics.mean(len(s["ids"]) for s in samples):.0f} tokens; {a.rounds} steps x {a.reps} processes '
          f'per variant, batch 1, {a.autocast}; torch {torch.__version__}')
    for name, d in (('initial', a.model), ('trained', a.trained)):
        print(f'{name}: {denormal_share(d, samples[0]["ids"])}')
    variants = [(f'{name}, flush denormal {flush}', d, flush)
                for name, d in (('initial', a.model), ('trained', a.trained)) for flush in ('off', 'on')]
    ms = [[] for _ in variants]
    for _ in range(a.reps):
        for k, (_, d, flush) in enumerate(variants):
            env = {**os.environ, 'THINKFL_BENCH_FLUSH': flush}
            out = subprocess.run([sys.executable, __file__, '--one', f'{d}|{flush}', '--samples', a.samples, '--trained', a.trained,
                                  '--rounds', str(a.rounds), '--autocast', a.autocast],
                                 env=env, capture_output=True, text=True, check=True).stdout
            ms[k] += json.loads(out.strip().splitlines()[-1])
    base = statistics.median(ms[0])
    for (name, _, _), xs in zip(variants, ms):
        m = statistics.median(xs)
        print(f'{name:32s} {m:7.1f} ms/step (min {min(xs):6.1f})  {m / base:5.2f}x')
    print(f'load average after: {load()}')


if __name__ == '__main__':
    main()

"""One SFT step of the tiny-cpu model per episode: activation checkpointing on and off, and 1, 2 or 4
episodes per pass, against the preset's layout (checkpointing off, one per pass) measured in this run.

Episodes are ragged like the preset's teacher conversations (900-1,700 tokens, loss on the last
quarter). Prints the CPU model, the load average, ms per episode and the ratio to the baseline.

    .cache/venv/bin/python scripts/bench/sft-step-layout.py [--model .cache/models/tiny] [--seconds 10] [--autocast auto]
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import torch  # noqa: E402
import transformers  # noqa: E402

from thinkfl_engine.trainer import Trainer  # noqa: E402
from machine import cpu_model, load  # noqa: E402  (scripts/bench/machine.py)


def episodes(vocab: int, n: int):
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n):
        length = int(torch.randint(900, 1700, (1,), generator=g))
        ids = [1] + torch.randint(3, vocab, (length - 1,), generator=g).tolist()
        out.append((ids, [0] * (length - length // 4) + [1] * (length // 4)))
    return out


def ms_per_episode(trainer: Trainer, data, per_pass: int, seconds: float) -> float:
    def step(i):
        rows = [data[(i + k) % len(data)] for k in range(per_pass)]
        trainer.sft_step({'input_ids': [r[0] for r in rows], 'mask': [r[1] for r in rows], 'micro_batch_size': per_pass})
    step(0)  # warm-up
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step(done * per_pass)
        done += 1
    return (time.perf_counter() - t0) / (done * per_pass) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', default='.cache/models/tiny', help='tiny model dir (made by the main job)')
    ap.add_argument('--seconds', type=float, default=10.0, help='timed seconds per layout')
    ap.add_argument('--autocast', default='auto', help="compute precision, as workers.train.autocast")
    a = ap.parse_args()
    transformers.utils.logging.disable_progress_bar()
    layouts = [('baseline: checkpointing off, 1 per pass', False, 1), ('checkpointing on, 1 per pass', True, 1),
               ('checkpointing off, 2 per pass', False, 2), ('checkpointing off, 4 per pass', False, 4)]
    print(f'CPU: {cpu_model()}; load average {load()}; autocast {a.autocast}')
    base = None
    for name, checkpointing, per_pass in layouts:
        trainer = Trainer({'model_dir': a.model, 'seed': 0, 'autocast': a.autocast,
                           'gradient_checkpointing': checkpointing, 'optimizer': {'lr': 1e-4}})
        data = episodes(trainer.vocab_size, 16)
        ms = ms_per_episode(trainer, data, per_pass, a.seconds)
        base = base or ms
        print(f'{name:42s} {ms:7.1f} ms/episode  {ms / base:5.2f}x', flush=True)


if __name__ == '__main__':
    main()

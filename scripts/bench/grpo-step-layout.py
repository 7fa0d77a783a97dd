"""One GRPO update (`Trainer.grpo_step`: the reference's log-probabilities, the policy's forward and
backward, AdamW) of a group at 1, 2 and 4 sequences per forward/backward pass
(workers.train.micro_batch_size), rounds alternating, against 1 per pass measured in this run.

Two groups of 4: the bench:peers shape (one prompt of 566 tokens and 48 sampled tokens a sequence,
the loss on those) and the main job's (ragged episodes of 800-1,400 tokens, the loss on a tenth).
Prints the CPU model, the load average, the median ms per update [min-max] and the ratio.

    .cache/venv/bin/python scripts/bench/grpo-step-layout.py [--model .cache/models/peers-tiny] [--rounds 8] [--autocast float32]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import torch  # noqa: E402
import transformers  # noqa: E402

from thinkfl_engine.trainer import Trainer  # noqa: E402
from machine import cpu_model, load  # noqa: E402  (scripts/bench/machine.py)

LOSS = {'eps_low': 0.2, 'eps_high': 0.2, 'kl_coef': 0.001, 'kl_estimator': 'k3', 'aggregation': 'token-mean'}


def group(vocab: int, shape: str):
    g = torch.Generator().manual_seed(0)
    rand = lambda n: torch.randint(3, vocab, (n,), generator=g).tolist()  # noqa: E731
    if shape == 'peers':
        prompt = [1] + rand(565)
        rows = [prompt + rand(48) for _ in range(4)]
        return rows, [[0] * 566 + [1] * 48 for _ in rows]
    rows, mask = [], []
    for _ in range(4):
        n = int(torch.randint(800, 1400, (1,), generator=g))
        rows.append([1] + rand(n - 1))
        mask.append([0] * (n - n // 10) + [1] * (n // 10))
    return rows, mask


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', default='.cache/models/peers-tiny', help='tiny model dir (made by bench:peers or the main job)')
    ap.add_argument('--rounds', type=int, default=8, help='timed rounds, each layout once a round')
    ap.add_argument('--autocast', default='float32', help='compute precision, as workers.train.autocast')
    a = ap.parse_args()
    transformers.utils.logging.disable_progress_bar()
    trainer = Trainer({'model_dir': a.model, 'seed': 0, 'autocast': a.autocast, 'gradient_checkpointing': False,
                       'optimizer': {'lr': 0.0}})
    trainer.set_reference({'tag': 'bench'})
    print(f'CPU: {cpu_model()}; load average {load()}; autocast {a.autocast}; {torch.get_num_threads()} threads')
    for shape in ('peers', 'main job'):
        ids, mask = group(trainer.vocab_size, shape)
        per = {1: [], 2: [], 4: []}
        for r in range(a.rounds + 1):
            for mb in per:
                t0 = time.perf_counter()
                trainer.grpo_step({'input_ids': ids, 'mask': mask, 'advantages': [1.0, -1.0, 0.5, -0.5], 'loss': LOSS,
                                   'micro_batch_size': mb})
                if r > 0:
                    per[mb].append((time.perf_counter() - t0) * 1000)
        base = statistics.median(per[1])
        lengths = sorted(len(x) for x in ids)
        print(f'{shape}: 4 sequences of {lengths[0]}-{lengths[-1]} tokens, {sum(map(sum, mask))} trained; load {load()}')
        for mb, xs in per.items():
            m = statistics.median(xs)
            print(f'  {mb} per pass{" (baseline)" if mb == 1 else ""}: {m:.1f} ms [{min(xs):.1f}-{max(xs):.1f}]  {m / base:.2f}x')


if __name__ == '__main__':
    main()

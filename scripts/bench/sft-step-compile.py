"""The SFT step of the main job (Trainer.sft_step on the teacher conversations) eagerly against its
decoder layers under torch.compile (inductor, dynamic shapes). Two Trainers of the same model in this
process, one with its layers compiled, take turns step by step on the same conversations (which goes
first alternates), so that a host whose speed swings by 1.5x within minutes hits both alike: the
figure is the median of the per-step ratios. Prints the CPU model and the load, the compiled
Trainer's first three steps (compilation included; inductor's cache is --cache, empty on first use),
the medians after ten steps, the ratio per 50 steps, and the first losses of both (compiled kernels
round differently, so they drift apart).

    .cache/venv/bin/python scripts/bench/sft-step-compile.py --samples RUN_DIR/teacher-samples.json \
        [--model .cache/models/tiny] [--autocast float32|bfloat16] [--steps 260] [--cache DIR]

Every layer but the last is compiled: the last runs at the loss positions only (decoder.py), on
index tensors whose sizes change every step.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--samples', required=True, help='RUN_DIR/teacher-samples.json of a trainer-ctl train run')
    ap.add_argument('--model', type=Path, default=REPO / '.cache' / 'models' / 'tiny')
    ap.add_argument('--autocast', default='float32', choices=['float32', 'bfloat16'])
    ap.add_argument('--steps', type=int, default=260)
    ap.add_argument('--cache', help="inductor's cache dir (TORCHINDUCTOR_CACHE_DIR); default a new temp dir")
    a = ap.parse_args()
    if a.steps < 13:
        ap.error('--steps must be at least 13 (the medians are over the steps after the tenth)')
    os.environ['TORCHINDUCTOR_CACHE_DIR'] = a.cache or tempfile.mkdtemp(prefix='sft-compile-')

    # Imported after the cache dir is set, so that inductor reads it from the start.
    import thinkfl_engine  # noqa: F401  (sets OpenMP's wait policy before torch loads)
    import transformers
    from machine import cpu_model, load  # scripts/bench/machine.py
    from thinkfl_engine.trainer import Trainer

    transformers.utils.logging.disable_progress_bar()
    print(f'{cpu_model()}; {a.autocast}; {a.steps} steps each; load {load()}', flush=True)
    optimizer = {'lr': 5e-3, 'weight_decay': 0, 'betas': [0.9, 0.999], 'eps': 1e-8, 'max_grad_norm': 1}
    load_args = {'model_dir': str(a.model), 'device': 'cpu', 'dtype': 'float32', 'autocast': a.autocast, 'seed': 0}
    trainers = {
        'eager': Trainer({**load_args, 'optimizer': optimizer}),
        'compile': Trainer({**load_args, 'optimizer': optimizer}),
    }
    for layer in trainers['compile'].policy.module.get_decoder().layers[:-1]:
        layer.compile(dynamic=True)
    samples = json.loads(Path(a.samples).read_text())
    ms: dict[str, list[float]] = {'eager': [], 'compile': []}
    losses: dict[str, list[float]] = {'eager': [], 'compile': []}
    for i in range(a.steps):
        s = samples[i % len(samples)]
        for name in ('eager', 'compile') if i % 2 == 0 else ('compile', 'eager'):
            t0 = time.perf_counter()
            out = trainers[name].sft_step({'input_ids': [s['ids']], 'mask': [s['mask']], 'lr': 5e-3})
            ms[name].append((time.perf_counter() - t0) * 1000)
            losses[name].append(out['loss'])
    print(f'compiled: first 3 steps {sum(ms["compile"][:3]) / 1000:.2f} s (eager {sum(ms["eager"][:3]) / 1000:.2f} s)')
    ratios = [c / e for e, c in zip(ms['eager'][10:], ms['compile'][10:])]
    for name in ms:
        print(
            f'{name:8s} median step {statistics.median(ms[name][10:]):6.1f} ms   first losses {[round(x, 6) for x in losses[name][:5]]}'
        )
    per50 = [round(statistics.median(ratios[k : k + 50]), 2) for k in range(0, len(ratios), 50)]
    print(f'compile / eager, median of per-step ratios: {statistics.median(ratios):.3f}x; per 50 steps {per50}')
    print(f'load average after: {load()}')


if __name__ == '__main__':
    main()

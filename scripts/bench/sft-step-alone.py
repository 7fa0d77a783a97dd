"""The engine's SFT step alone, for scripts/bench/sft-step-path.ts: a Trainer in this process, no protocol.

Reads JSON lines on stdin: first the engine's `load` args, then `sft_step` args as the train worker
sends them (token-batch file references included). Each is checked and turned into inline arrays as
the engine's server does (protocol.check_args, step_file.step_args), outside the step's timer; the
answer is one line {ms, loss, parts}: ms is Trainer.sft_step alone (perf_counter), parts the ms of
its pieces (forward, backward, gradient clipping, AdamW) and of the two request preparations.
"""
import json
import sys
import time
from pathlib import Path
from typing import Callable, Dict

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import torch  # noqa: E402
import transformers  # noqa: E402

from thinkfl_engine import protocol  # noqa: E402
from thinkfl_engine.step_file import step_args  # noqa: E402
from thinkfl_engine.trainer import Trainer  # noqa: E402

parts: Dict[str, float] = {}


def timed(name: str, f: Callable) -> Callable:
    def run(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            parts[name] = parts.get(name, 0.0) + (time.perf_counter() - t0) * 1000

    return run


def main() -> None:
    transformers.utils.logging.disable_progress_bar()
    lines = iter(sys.stdin)
    trainer = Trainer(json.loads(next(lines)))
    up = trainer.updater
    trainer._train_forward = timed('forward (model + head)', trainer._train_forward)
    up.backward = timed('backward', up.backward)
    up.optimizer.step = timed('AdamW step', up.optimizer.step)
    torch.nn.utils.clip_grad_norm_ = timed('gradient norm + clip', torch.nn.utils.clip_grad_norm_)
    check = timed('request: check_args', protocol.check_args)
    read = timed('request: step_args (step file)', step_args)
    print(json.dumps({'ready': True}), flush=True)
    for line in lines:
        parts.clear()
        raw = json.loads(line)
        check('sft_step', raw)
        args = read(raw)
        t0 = time.perf_counter()
        out = trainer.sft_step(args)
        ms = (time.perf_counter() - t0) * 1000
        print(json.dumps({'ms': ms, 'loss': out['loss'], 'parts': parts}), flush=True)


if __name__ == '__main__':
    main()

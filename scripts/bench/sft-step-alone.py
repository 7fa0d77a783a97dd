"""The engine's SFT step alone, for scripts/bench/sft-step-path.ts: a Trainer in this process, no protocol.

Reads JSON lines on stdin: first the engine's `load` args, then `sft_step` args as the train worker
sends them (token-batch file references included); turns each into inline arrays outside the timer
and answers one line {ms, loss, grad_norm}, where ms is Trainer.sft_step alone (perf_counter).
"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import transformers  # noqa: E402

from thinkfl_engine.step_file import step_args  # noqa: E402
from thinkfl_engine.trainer import Trainer  # noqa: E402


def main() -> None:
    transformers.utils.logging.disable_progress_bar()
    lines = iter(sys.stdin)
    trainer = Trainer(json.loads(next(lines)))
    print(json.dumps({'ready': True}), flush=True)
    for line in lines:
        args = step_args(json.loads(line))
        t0 = time.perf_counter()
        out = trainer.sft_step(args)
        ms = (time.perf_counter() - t0) * 1000
        print(json.dumps({'ms': ms, 'loss': out['loss'], 'grad_norm': out['grad_norm']}), flush=True)


if __name__ == '__main__':
    main()

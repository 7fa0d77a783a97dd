"""Log-probabilities of a batch, with backward: the engine's chunked head against the naive full-logits path.

Tiny random Qwen2 with the 151,936-token vocabulary; prints tokens/s and peak resident memory above
the start of each pass (Linux), and the chunked/naive ratios, measured in the same run.

    .cache/venv/bin/python scripts/bench/logprob-memory.py [--batch 2] [--tokens 512] [--chunk 1024] [--repeat 3]
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import torch  # noqa: E402
import transformers  # noqa: E402

from thinkfl_engine.logprobs import token_logprobs  # noqa: E402
from thinkfl_engine.models import create_tiny, load_model  # noqa: E402
from thinkfl_engine.ops import _status_bytes  # noqa: E402

VOCAB = 151936


def naive(policy, ids):
    logits = policy.logits(policy.module, ids, torch.ones_like(ids))[:, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def chunked(policy, ids, chunk):
    hidden = policy.hidden(policy.module, ids, torch.ones_like(ids))
    return token_logprobs(hidden, policy.head(policy.module), ids, chunk=chunk)[0]


def measure(fn, repeat):
    """(tokens/s, peak bytes above the start) over `repeat` forward + backward passes."""
    rss = _status_bytes('VmRSS')
    Path('/proc/self/clear_refs').write_text('5')
    start = time.perf_counter()
    for _ in range(repeat):
        fn().sum().backward()
    return time.perf_counter() - start, _status_bytes('VmHWM') - rss


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--batch', type=int, default=2)
    p.add_argument('--tokens', type=int, default=512)
    p.add_argument('--chunk', type=int, default=1024)
    p.add_argument('--repeat', type=int, default=3)
    a = p.parse_args()
    torch.manual_seed(0)
    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        create_tiny(Path(tmp), {'architecture': 'qwen2', 'vocab_size': VOCAB, 'hidden_size': 64, 'num_hidden_layers': 2,
                                'num_attention_heads': 4, 'num_key_value_heads': 2, 'head_dim': 16,
                                'intermediate_size': 128}, 0)
        policy = load_model(Path(tmp), torch.device('cpu'), torch.float32, reference=False)
    policy.module.train()
    ids = torch.randint(0, VOCAB, (a.batch, a.tokens))
    torch.testing.assert_close(chunked(policy, ids, a.chunk), torch.cat((torch.zeros(a.batch, 1), naive(policy, ids)), 1))
    tokens = a.batch * a.tokens * a.repeat
    rows = {}
    for name, fn in (('naive', lambda: naive(policy, ids)), ('chunked', lambda: chunked(policy, ids, a.chunk))):
        fn().sum().backward()  # warm-up: gradient buffers exist before measuring
        seconds, peak = measure(fn, a.repeat)
        rows[name] = (tokens / seconds, peak)
        print(f'{name:8s} {tokens / seconds:10.0f} tokens/s  peak +{peak / 2**20:8.1f} MiB')
    print(f'chunked/naive: speed x{rows["chunked"][0] / rows["naive"][0]:.2f}, peak memory x{rows["chunked"][1] / rows["naive"][1]:.3f}'
          f' (batch {a.batch} x {a.tokens} tokens, chunk {a.chunk}, vocab {VOCAB})')


if __name__ == '__main__':
    main()

"""GPU smoke test of the train engine (not part of CI): a random-init Qwen2.5-3B-shaped model trained
for a few GRPO steps, full fine-tuning and LoRA, through the engine's own Trainer. Prints tokens/s,
peak GPU memory and MFU (6 x trainable-path parameters x tokens/s over the card's peak bf16 FLOP/s).

    .cache/venv/bin/python scripts/gpu/engine_smoke.py [--shape qwen2.5-3b|tiny] [--device cuda] ...
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import torch  # noqa: E402
import transformers  # noqa: E402

from thinkfl_engine.models import create_tiny  # noqa: E402
from thinkfl_engine.trainer import Trainer  # noqa: E402

SHAPES = {
    # Qwen/Qwen2.5-3B's config.json sizes.
    'qwen2.5-3b': {'architecture': 'qwen2', 'vocab_size': 151936, 'hidden_size': 2048, 'num_hidden_layers': 36,
                   'num_attention_heads': 16, 'num_key_value_heads': 2, 'head_dim': 128, 'intermediate_size': 11008,
                   'rope_theta': 1000000.0, 'tie_word_embeddings': True, 'max_position_embeddings': 32768},
    'tiny': {'architecture': 'qwen2', 'vocab_size': 151936, 'hidden_size': 64, 'num_hidden_layers': 2,
             'num_attention_heads': 4, 'num_key_value_heads': 2, 'head_dim': 16, 'intermediate_size': 128},
}


def run(model_dir: Path, a, lora) -> dict:
    trainer = Trainer({'model_dir': str(model_dir), 'device': a.device, 'dtype': 'bfloat16', 'reference': True,
                       'lora': lora, 'optimizer': {'lr': 1e-5}, 'seed': 0})
    g = torch.Generator().manual_seed(0)
    vocab = trainer.vocab_size
    ids = torch.randint(0, vocab, (a.batch, a.tokens), generator=g).tolist()
    mask = [[0] * (a.tokens // 4) + [1] * (a.tokens - a.tokens // 4) for _ in ids]
    args = {'input_ids': ids, 'mask': mask, 'advantages': [1.0 if i % 2 else -1.0 for i in range(a.batch)],
            'micro_batch_tokens': a.micro_batch_tokens, 'loss': {'kl_coef': 0.01}}
    trainer.grpo_step(args)  # warm-up: optimizer state, kernels
    cuda = a.device.startswith('cuda')
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(a.steps):
        out = trainer.grpo_step(args)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens_per_s = a.batch * a.tokens * a.steps / seconds
    params = sum(p.numel() for p in trainer.policy.module.parameters())
    # Forward + backward ~ 6 FLOPs per parameter and token, plus the reference forward (2).
    flops = (6 + 2) * params * tokens_per_s
    return {'mode': 'lora' if lora else 'full', 'parameters': params,
            'trainable_parameters': trainer.describe()['trainable_parameters'],
            'tokens_per_s': round(tokens_per_s, 1), 'step_s': round(seconds / a.steps, 3),
            'peak_memory_gib': round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
            'mfu': round(flops / (a.peak_tflops * 1e12), 4), 'last_loss': out['loss']}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument('--shape', choices=sorted(SHAPES), default='qwen2.5-3b')
    p.add_argument('--device', default='cuda')
    p.add_argument('--batch', type=int, default=8)
    p.add_argument('--tokens', type=int, default=2048)
    p.add_argument('--micro-batch-tokens', type=int, default=8192)
    p.add_argument('--steps', type=int, default=3)
    p.add_argument('--peak-tflops', type=float, default=989.0, help='peak dense bf16 TFLOP/s of the card (H100 SXM: 989)')
    a = p.parse_args()
    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / 'model'
        create_tiny(model_dir, SHAPES[a.shape], seed=0)
        for lora in (None, {'r': 16, 'alpha': 32}):
            print(json.dumps(run(model_dir, a, lora)), flush=True)
            if a.device.startswith('cuda'):
                torch.cuda.empty_cache()


if __name__ == '__main__':
    main()

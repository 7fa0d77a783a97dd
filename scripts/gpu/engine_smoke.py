"""Smoke test and speed figures of the train engine on a bare machine: Python only, no set-up, no network.

A random-init model of the Qwen2.5-3B shape (or a tiny one) makes SFT and GRPO steps through the
engine's own Trainer, with full fine-tuning and with LoRA, on 1 rank and, where there are 2 GPUs
(or when asked), on 2 ranks started by torchrun (each rank trains half the micro-batches). Needs
torch, transformers and peft; DeepSpeed ZeRO-2 is used when `--deepspeed auto` finds it importable.
Prints one JSON line per (mode, ranks, step kind): tokens/s, step time, peak memory and MFU.

    python scripts/gpu/engine_smoke.py                               # GPU: Qwen2.5-3B shape on cuda
    python scripts/gpu/engine_smoke.py --shape tiny --device cpu     # the same code, in CI

MFU counts model FLOPs (PaLM, Chowdhery et al. 2022, appendix B): per trained token 6 N for full
fine-tuning (forward 2 N, backward 4 N) and 4 N for LoRA (the frozen weights get no weight
gradient), plus 2 N for the KL reference's forward in GRPO, plus attention's 12 L d T (8 L d T
for LoRA), over the device's peak dense bf16 FLOP/s; N counts the matmul weights (not the embedding
lookup). Gradient checkpointing's recomputed forward is not counted, as in PaLM's MFU.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import torch  # noqa: E402
import transformers  # noqa: E402

from thinkfl_engine.distributed import Ranks  # noqa: E402
from thinkfl_engine.models import create_tiny  # noqa: E402
from thinkfl_engine.precision import resolve_compute  # noqa: E402
from thinkfl_engine.trainer import Trainer  # noqa: E402

SHAPES = {
    # Qwen/Qwen2.5-3B's config.json sizes.
    'qwen2.5-3b': {'architecture': 'qwen2', 'vocab_size': 151936, 'hidden_size': 2048, 'num_hidden_layers': 36,
                   'num_attention_heads': 16, 'num_key_value_heads': 2, 'head_dim': 128, 'intermediate_size': 11008,
                   'rope_theta': 1000000.0, 'tie_word_embeddings': True, 'max_position_embeddings': 32768},
    'tiny': {'architecture': 'qwen2', 'vocab_size': 1024, 'hidden_size': 64, 'num_hidden_layers': 2,
             'num_attention_heads': 4, 'num_key_value_heads': 2, 'head_dim': 16, 'intermediate_size': 128,
             'tie_word_embeddings': True},
}
# Peak dense bf16 TFLOP/s by GPU name (vendor data sheets); other devices need --peak-tflops for an MFU.
PEAK_TFLOPS = {'H200': 989.0, 'H100': 989.0, 'A100': 312.0, 'L40S': 362.0, 'A10': 125.0}
LORA = {'r': 16, 'alpha': 32.0}


def peak_tflops(device: str, given: Optional[float]) -> Optional[float]:
    if given:
        return given
    if device.startswith('cuda') and torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    return None


def peak_memory_gib(cuda: bool) -> float:
    if cuda:
        return torch.cuda.max_memory_allocated() / 2**30
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) / 2**20
    return float('nan')


def reset_peak(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    else:
        Path('/proc/self/clear_refs').write_text('5')


def flops_per_token(trainer: Trainer, lora: bool, kl: bool, tokens: int) -> float:
    config = trainer.policy.module.config
    total = sum(p.numel() for p in trainer.policy.module.parameters())
    # The embedding is a lookup, not a matmul, unless it is also the output head (tied). LoRA's
    # adapter weights (a few percent of N) are counted like the frozen ones.
    matmul = total if config.tie_word_embeddings else total - trainer.policy.module.get_input_embeddings().weight.numel()
    attention = config.num_hidden_layers * config.hidden_size * tokens
    train = (4 if lora else 6) * matmul + (8 if lora else 12) * attention
    return train + ((2 * matmul + 4 * attention) if kl else 0)


def batch(trainer: Trainer, a: argparse.Namespace) -> Dict[str, Any]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, trainer.vocab_size, (a.batch, a.tokens), generator=g).tolist()
    prompt = a.tokens // 4
    mask = [[0] * prompt + [1] * (a.tokens - prompt) for _ in ids]
    return {'input_ids': ids, 'mask': mask, 'micro_batch_size': a.micro_batch_size,
            'advantages': [1.0 if i % 2 else -1.0 for i in range(a.batch)], 'loss': {'kl_coef': a.kl_coef},
            'temperature': 0.9}


def measure(trainer: Trainer, op: str, args: Dict[str, Any], a: argparse.Namespace, cuda: bool) -> Dict[str, Any]:
    step = trainer.sft_step if op == 'sft' else trainer.grpo_step
    step(args)  # warm-up: optimizer state, kernels, allocator
    reset_peak(cuda)
    start = time.perf_counter()
    for _ in range(a.steps):
        out = step(args)
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / a.steps
    if not all(isinstance(out[k], float) and out[k] == out[k] for k in ('loss', 'grad_norm')):
        raise SystemExit(f'{op}: non-finite loss or gradient norm: {out}')
    return {'step_s': seconds, 'loss': out['loss'], 'grad_norm': out['grad_norm'],
            'peak_memory_gib': peak_memory_gib(cuda)}


def run(model_dir: Path, a: argparse.Namespace, ranks: Optional[Ranks], lora: bool) -> List[Dict[str, Any]]:
    cuda = a.device.startswith('cuda')
    device = torch.device(a.device)
    compute, _ = resolve_compute('auto', device)
    deepspeed = None
    if a.deepspeed == 'auto':
        try:
            import deepspeed as _  # noqa: F401
            deepspeed = {'zero_optimization': {'stage': 2}, **({'bf16': {'enabled': True}} if compute == torch.bfloat16 else {})}
        except ImportError:
            deepspeed = None
    trainer = Trainer({'model_dir': str(model_dir), 'device': a.device, 'autocast': None if deepspeed else 'auto',
                       'lora': LORA if lora else None, 'optimizer': {'lr': 1e-5}, 'seed': 0, 'deepspeed': deepspeed,
                       'gradient_checkpointing': True}, ranks)
    if a.kl_coef:
        trainer.set_reference({'tag': 'smoke'})
    args = batch(trainer, a)
    world = ranks.world if ranks else 1
    peak = peak_tflops(a.device, a.peak_tflops)
    compute_label = ('bfloat16' if 'bf16' in deepspeed else 'float32') if deepspeed else trainer.describe()['compute_dtype']
    processed = a.batch * a.tokens
    trained = sum(map(sum, args['mask']))
    rows = []
    for op in ('sft', 'grpo'):
        m = measure(trainer, op, args, a, cuda)
        # Every rank trains its share of the batch: per second of one step, the whole batch's tokens.
        tokens_per_s = processed / m['step_s']
        flops = flops_per_token(trainer, lora, op == 'grpo' and a.kl_coef > 0, a.tokens) * tokens_per_s
        memory = ranks.gather(m['peak_memory_gib']) if ranks else [m['peak_memory_gib']]
        rows.append({'shape': a.shape, 'device': torch.cuda.get_device_name() if cuda else 'cpu',
                     'mode': 'lora' if lora else 'full', 'ranks': world, 'step': op,
                     'engine': 'deepspeed zero-2' if deepspeed else 'torch', 'compute': compute_label,
                     'parameters': trainer.describe()['parameters'],
                     'trainable_parameters': trainer.describe()['trainable_parameters'],
                     'batch': a.batch, 'tokens_per_sequence': a.tokens, 'step_s': round(m['step_s'], 4),
                     'tokens_per_s': round(tokens_per_s, 1), 'trained_tokens_per_s': round(trained / m['step_s'], 1),
                     'peak_memory_gib_per_rank': round(max(memory), 3),
                     'mfu': round(flops / (world * peak * 1e12), 4) if peak else None,
                     'loss': m['loss'], 'grad_norm': m['grad_norm']})
    del trainer
    if cuda:
        torch.cuda.empty_cache()
    return rows


def child(a: argparse.Namespace) -> None:
    """One process of a run (under torchrun with --ranks > 1): every mode on the model dir, rank 0 prints."""
    ranks = Ranks.from_env()
    for mode in a.modes.split(','):
        for row in run(Path(a.model_dir), a, ranks, mode == 'lora'):
            if ranks is None or ranks.main:
                print(json.dumps(row), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--shape', choices=sorted(SHAPES), default='qwen2.5-3b')
    p.add_argument('--device', default='cuda')
    p.add_argument('--ranks', default=None, help='comma-separated rank counts; default 1, and 2 where there are 2 GPUs')
    p.add_argument('--modes', default='full,lora')
    p.add_argument('--batch', type=int, default=None, help='sequences per step (default 8; tiny: 4)')
    p.add_argument('--tokens', type=int, default=None,
                   help='tokens per sequence, the first quarter prompt (default 2048; tiny: 256)')
    p.add_argument('--micro-batch-size', type=int, default=1)
    p.add_argument('--steps', type=int, default=3, help='timed steps of each kind, after one warm-up step')
    p.add_argument('--kl-coef', type=float, default=0.001)
    p.add_argument('--deepspeed', choices=('auto', 'off'), default='auto', help='ZeRO-2 when deepspeed imports')
    p.add_argument('--peak-tflops', type=float, default=None, help='peak dense bf16 TFLOP/s of one device, for the MFU')
    p.add_argument('--model-dir', help=argparse.SUPPRESS)
    a = p.parse_args()
    tiny = a.shape == 'tiny'
    a.batch = a.batch or (4 if tiny else 8)
    a.tokens = a.tokens or (256 if tiny else 2048)
    transformers.utils.logging.disable_progress_bar()
    if a.model_dir:
        return child(a)
    if a.device.startswith('cuda') and not torch.cuda.is_available():
        raise SystemExit('--device cuda: torch sees no GPU (use --device cpu)')
    gpus = torch.cuda.device_count() if a.device.startswith('cuda') else 0
    counts = [int(x) for x in a.ranks.split(',')] if a.ranks else [1] + ([2] if gpus >= 2 else [])
    if a.device.startswith('cuda') and max(counts) > gpus:
        raise SystemExit(f'--ranks {max(counts)} needs as many GPUs; this machine has {gpus}')
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / 'model'
        started = time.perf_counter()
        create_tiny(model_dir, SHAPES[a.shape], seed=0)
        print(json.dumps({'created': a.shape, 'seconds': round(time.perf_counter() - started, 1)}), flush=True)
        for n in counts:
            cmd = [sys.executable] + (['-m', 'torch.distributed.run', '--standalone', f'--nproc-per-node={n}'] if n > 1 else []) + \
                  [__file__, *sys.argv[1:], '--model-dir', str(model_dir)]
            env = {**os.environ, 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', str(max(1, (os.cpu_count() or 1) // n)))}
            done = subprocess.run(cmd, env=env)
            if done.returncode != 0:
                raise SystemExit(f'{n} rank(s): exit code {done.returncode}')


if __name__ == '__main__':
    main()

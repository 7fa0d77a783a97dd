"""The first ONNX policy export of an engine process: tracing the graphs (no cache, as every engine
did before onnx_graph_cache.py) against reading them from the cache an earlier engine filled, with
the weights-only export of later updates beside them. Each variant runs in a new process of its own, as a
new engine does (so a trace pays the exporter's start-up too); the variants alternate, round after round. Prints the CPU
model, the load average, the median seconds of each and its ratio to the trace, and checks that
the cached export writes the same bytes as the traced one.

    .cache/venv/bin/python scripts/bench/onnx-graph-cache.py [--shape tiny|qwen0.5b] [--rounds 3]

tiny: the tiny-cpu preset's model (hidden 128, 3 layers, vocab 2,124); qwen0.5b: a random-init
model of Qwen2.5-0.5B's shape (hidden 896, 24 layers, vocab 151,936; 494 M parameters).
"""
import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'engine'))

import thinkfl_engine  # noqa: E402,F401  (sets OpenMP's wait policy before torch loads)
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config  # noqa: E402

from thinkfl_engine.onnx_weights import PolicyGraphs  # noqa: E402
from machine import cpu_model, load  # noqa: E402  (scripts/bench/machine.py)

SHAPES = {
    'tiny': lambda: LlamaConfig(
        hidden_size=128, num_hidden_layers=3, num_attention_heads=2, head_dim=64, intermediate_size=256, vocab_size=2124
    ),
    'qwen0.5b': lambda: Qwen2Config(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
    ),
}


def child(model_dir: Path, out: Path, cache: str) -> None:
    """One new engine's first export (and, with --weights, the next one): prints its seconds and how."""
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    graphs = PolicyGraphs()
    t0 = time.perf_counter()
    first = graphs.write(model, out / 'first', cache_dir=Path(cache) if cache else None)
    t1 = time.perf_counter()
    graphs.write(model, out / 'next')
    print(f'{first["graphs"]} {t1 - t0:.4f} {time.perf_counter() - t1:.4f}')


def run_child(model_dir: Path, out: Path, cache: str) -> tuple[str, float, float]:
    cmd = [sys.executable, __file__, '--child', str(model_dir), '--out', str(out), '--cache', cache]
    how, first, following = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-3:]
    return how, float(first), float(following)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--shape', default='tiny', choices=sorted(SHAPES))
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--child', help=argparse.SUPPRESS)
    ap.add_argument('--out', help=argparse.SUPPRESS)
    ap.add_argument('--cache', default='', help=argparse.SUPPRESS)
    a = ap.parse_args()
    transformers.utils.logging.disable_progress_bar()
    if a.child:
        return child(Path(a.child), Path(a.out), a.cache)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(SHAPES[a.shape]()).eval()
    params = sum(p.numel() for p in model.parameters())
    print(f'{cpu_model()}, {torch.get_num_threads()} threads; {a.shape}: {params / 1e6:.1f} M parameters; load {load()}')
    times: dict[str, list[float]] = {'traced (no cache)': [], 'read from the cache': [], 'weights only (the next export)': []}
    with tempfile.TemporaryDirectory(prefix='onnx-graph-cache-') as tmp:
        root = Path(tmp)
        model_dir, cache = root / 'model', str(root / 'cache')
        model.save_pretrained(model_dir)
        del model
        run_child(model_dir, root / 'fill', cache)  # an earlier engine fills the cache, untimed
        for r in range(a.rounds):
            how_t, traced, following = run_child(model_dir, root / f'traced-{r}', '')
            how_c, cached, _ = run_child(model_dir, root / f'cached-{r}', cache)
            assert (how_t, how_c) == ('traced', 'cached'), (how_t, how_c)
            times['traced (no cache)'].append(traced)
            times['read from the cache'].append(cached)
            times['weights only (the next export)'].append(following)
            for f in ('model.onnx', 'decode.onnx'):
                same = (root / f'traced-{r}' / 'first' / f).read_bytes() == (root / f'cached-{r}' / 'first' / f).read_bytes()
                assert same, f'{f}: the cached export differs from the traced one'
            shutil.rmtree(root / f'traced-{r}')
            shutil.rmtree(root / f'cached-{r}')
    base = statistics.median(times['traced (no cache)'])
    print('the first export of a new engine process (each in a process of its own, alternating):')
    for name, xs in times.items():
        m = statistics.median(xs)
        print(f'  {name:32s} {m:8.2f} s (min {min(xs):7.2f}, max {max(xs):7.2f})  {m / base:5.3f}x')
    print(f'cached and traced exports byte-identical in all {a.rounds} rounds; load average after: {load()}')


if __name__ == '__main__':
    main()

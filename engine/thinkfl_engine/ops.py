"""The protocol's operations: name -> handler(state, args) -> JSON-able result."""

import platform
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from .batch import check_ragged, pad
from .distributed import Ranks, is_main
from .grpo_loss import LossSettings, Normalizers, grpo_loss
from .models import create_tiny
from .step_file import batch_stats, step_args
from .trainer import Trainer, validate_ids


class State:
    def __init__(self, ranks: Optional[Ranks] = None) -> None:
        self.ranks = ranks
        self.trainer: Optional[Trainer] = None
        # onnx_weights.PolicyGraphs: the ONNX graphs traced so far, kept across loads (per layout).
        self.graphs: Any = None

    def loaded(self) -> Trainer:
        if self.trainer is None:
            raise RuntimeError('no model loaded: send a load request first')
        return self.trainer


def info(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    return {
        'python': platform.python_version(),
        'torch': torch.__version__,
        'cuda': torch.cuda.is_available(),
        'loaded': state.trainer is not None,
    }


def create_tiny_op(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    return {'parameters': create_tiny(Path(args['out_dir']), dict(args['config']), int(args.get('seed', 0)))}


def load(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    state.trainer = None  # release the previous model before building the next one
    state.trainer = Trainer(args, state.ranks)
    return state.trainer.describe()


def logits(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    """Raw logits of the policy (or its reference) for short sequences; for checking exports, not for training."""
    t = state.loaded()
    ids = validate_ids(args['input_ids'])
    with torch.no_grad(), t.model_scope(args.get('model', 'policy')) as m:
        m.eval()
        out = [
            t.policy.logits(
                m, torch.tensor([row], device=t.device), torch.ones(1, len(row), dtype=torch.long, device=t.device)
            )[0]
            for row in ids
        ]
    return {'logits': [x.to('cpu', torch.float64).tolist() for x in out]}


def generate(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    """Greedy continuation of each prompt by transformers' `generate` (the reference for exported backends).

    Stops at the model's EOS ids or after max_new_tokens; per generated token its log-probability
    under the raw (unprocessed) distribution.
    """
    t = state.loaded()
    ids = validate_ids(args['input_ids'])
    tokens: List[List[int]] = []
    logprobs: List[List[float]] = []
    with torch.no_grad(), t.model_scope(args.get('model', 'policy')) as m:
        m.eval()
        for row in ids:
            prompt = torch.tensor([row], device=t.device)
            out = m.generate(
                input_ids=prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=False,
                max_new_tokens=int(args.get('max_new_tokens', 16)),
                use_cache=True,
                return_dict_in_generate=True,
                output_logits=True,
            )
            new = out.sequences[0, len(row) :]
            lp = [torch.log_softmax(step[0].double(), -1)[tok].item() for step, tok in zip(out.logits, new.tolist())]
            tokens.append(new.tolist())
            logprobs.append(lp)
    return {'tokens': tokens, 'logprobs': logprobs}


def export(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    t = state.loaded()
    out_dir = Path(args['dir'])
    fmt = args.get('format', 'onnx')
    if fmt not in ('onnx', 'weights'):
        raise ValueError(f"export format must be 'onnx' or 'weights', got {fmt!r}")
    result: Dict[str, Any] = {'dir': str(out_dir), 'step': t.step}
    # weights: the full model, or with LoRA the adapter alone (what vLLM's load_lora_adapter reads).
    # onnx: the full model + onnx/model.onnx; with LoRA the adapter as for weights and the merged
    # model with its ONNX export in merged/, so one dir serves vLLM and the onnx backend alike.
    # Beside model.onnx, decode.onnx (Llama and Qwen2) decodes rows that share a prompt in one pass.
    # The graphs are traced once per model layout (and kept in graph_cache, when given, for the next
    # engine); later exports write only the new weights.
    model_dir = t.write_model(out_dir, merged=fmt == 'onnx')
    if fmt == 'onnx' and is_main():
        from .onnx_export import load_for_export
        from .onnx_weights import PolicyGraphs

        if state.graphs is None:
            state.graphs = PolicyGraphs()
        cache = Path(args['graph_cache']) if args.get('graph_cache') else None
        result.update(
            state.graphs.write(load_for_export(model_dir), model_dir / 'onnx', args.get('external_data'), cache)
        )
    return result


def _status_bytes(field: str) -> int:
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith(field + ':'):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f'/proc/self/status has no {field}')


def memory(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    """Memory of the engine process in bytes: resident now, and peak since the last reset (Linux).

    reset=true starts a new peak from the current size (after reading it), on CPU and CUDA.
    """
    out: Dict[str, Any] = {'rss': _status_bytes('VmRSS'), 'peak_rss': _status_bytes('VmHWM')}
    if torch.cuda.is_available():
        out['cuda_allocated'] = torch.cuda.memory_allocated()
        out['cuda_peak'] = torch.cuda.max_memory_allocated()
    if args.get('reset'):
        Path('/proc/self/clear_refs').write_text('5')
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
    return out


def loss(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    """The GRPO loss math on given per-token values (float64), for test vectors."""
    lengths = [len(r) for r in args['logp']]
    for key in ('old', 'mask') + (('ref',) if args.get('ref') is not None else ()):
        check_ragged(key, args[key], lengths)
    cpu, d = torch.device('cpu'), torch.float64
    mask = pad(args['mask'], d, cpu)
    ref = pad(args['ref'], d, cpu) if args.get('ref') is not None else None
    out = grpo_loss(
        pad(args['logp'], d, cpu),
        pad(args['old'], d, cpu),
        ref,
        mask,
        torch.tensor(args['advantages'], dtype=d),
        LossSettings.from_json(args.get('loss')),
        Normalizers.of(mask),
    )
    return {k: float(v) for k, v in out.items()}


def gradcheck(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    from .gradcheck import run_gradcheck

    return run_gradcheck(int(args.get('seed', 0)))


OPS: Dict[str, Callable[[State, Dict[str, Any]], Any]] = {
    'info': info,
    'create_tiny': create_tiny_op,
    'load': load,
    'logprobs': lambda s, a: s.loaded().logprobs(step_args(a)),
    'logits': logits,
    'sft_step': lambda s, a: s.loaded().sft_step(step_args(a)),
    'grpo_step': lambda s, a: s.loaded().grpo_step(step_args(a)),
    'batch_stats': lambda s, a: batch_stats(a['batch']),
    'set_reference': lambda s, a: s.loaded().set_reference(a),
    'reset_optimizer': lambda s, a: s.loaded().reset_optimizer(a),
    'save': lambda s, a: s.loaded().save(Path(a['dir'])),
    'export': export,
    'generate': generate,
    'memory': memory,
    'loss': loss,
    'gradcheck': gradcheck,
    'shutdown': lambda s, a: {'bye': True},
}

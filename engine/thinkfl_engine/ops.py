"""The protocol's operations: name -> handler(state, args) -> JSON-able result."""
import platform
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import torch

from .batch import check_ragged, pad
from .grpo_loss import LossSettings, Normalizers, grpo_loss
from .models import create_tiny
from .step_file import batch_stats, step_args
from .tiny_model import TinyConfig
from .trainer import Trainer, validate_ids


class State:
    def __init__(self) -> None:
        self.trainer: Optional[Trainer] = None

    def loaded(self) -> Trainer:
        if self.trainer is None:
            raise RuntimeError('no model loaded: send a load request first')
        return self.trainer


def info(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    return {'python': platform.python_version(), 'torch': torch.__version__,
            'cuda': torch.cuda.is_available(), 'loaded': state.trainer is not None}


def create_tiny_op(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    config = TinyConfig(**args['config'])
    return {'parameters': create_tiny(Path(args['out_dir']), config, int(args.get('seed', 0)))}


def load(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    state.trainer = None  # release the previous model before building the next one
    state.trainer = Trainer(args)
    return state.trainer.describe()


def logits(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    """Raw logits of the policy for short sequences; meant for checking exports, not for training."""
    t = state.loaded()
    ids = validate_ids(args['input_ids'])
    m = t.policy.module.eval()
    with torch.no_grad():
        out = [t.policy.logits(m, torch.tensor([row], device=t.device), torch.ones(1, len(row), dtype=torch.long,
                                                                                   device=t.device))[0]
               for row in ids]
    return {'logits': [x.to('cpu', torch.float64).tolist() for x in out]}


def export(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    t = state.loaded()
    out_dir = Path(args['dir'])
    fmt = args.get('format', 'onnx')
    if fmt not in ('onnx', 'weights'):
        raise ValueError(f"export format must be 'onnx' or 'weights', got {fmt!r}")
    t.policy.save(out_dir)
    result: Dict[str, Any] = {'dir': str(out_dir), 'step': t.step}
    if fmt == 'onnx':
        if t.policy.kind != 'tiny':
            raise ValueError('onnx export supports thinkfl-tiny models only; export weights for vLLM instead')
        from .onnx_export import export_onnx
        result['onnx'] = str(export_onnx(t.policy.module, out_dir / 'onnx' / 'model.onnx'))
    return result


def loss(state: State, args: Dict[str, Any]) -> Dict[str, Any]:
    """The GRPO loss math on given per-token values (float64), for test vectors."""
    lengths = [len(r) for r in args['logp']]
    for key in ('old', 'mask') + (('ref',) if args.get('ref') is not None else ()):
        check_ragged(key, args[key], lengths)
    cpu, d = torch.device('cpu'), torch.float64
    mask = pad(args['mask'], d, cpu)
    ref = pad(args['ref'], d, cpu) if args.get('ref') is not None else None
    out = grpo_loss(pad(args['logp'], d, cpu), pad(args['old'], d, cpu), ref, mask,
                    torch.tensor(args['advantages'], dtype=d), LossSettings.from_json(args.get('settings')),
                    Normalizers.of(mask))
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
    'save': lambda s, a: s.loaded().save(Path(a['dir'])),
    'export': export,
    'loss': loss,
    'gradcheck': gradcheck,
    'shutdown': lambda s, a: {'bye': True},
}

"""Parameter updates: plain torch AdamW with grad-norm clipping, or DeepSpeed when configured.

Both take the loss of each micro-batch (already scaled by whole-batch normalizers) and step
once per request, returning the gradient norm before clipping.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn

from . import torch_files
from .distributed import is_main

OPTIMIZER_FILE = 'optimizer.pt'
# A DeepSpeed checkpoint's optimizer partitions, one file per rank.
DEEPSPEED_DIR = 'deepspeed'


@dataclass(frozen=True)
class OptimSettings:
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    max_grad_norm: float = 1.0

    @staticmethod
    def from_json(raw: Optional[Dict[str, Any]]) -> 'OptimSettings':
        raw = dict(raw or {})
        unknown = set(raw) - set(OptimSettings.__dataclass_fields__)
        if unknown:
            raise ValueError(f'optimizer settings: unknown keys {sorted(unknown)}')
        if 'betas' in raw:
            raw['betas'] = tuple(raw['betas'])
        return OptimSettings(**raw)


class PlainUpdater:
    def __init__(self, module: nn.Module, s: OptimSettings):
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=s.lr, betas=s.betas, eps=s.eps, weight_decay=s.weight_decay)
        self.max_grad_norm = s.max_grad_norm

    @property
    def partitioned(self) -> bool:
        """Whether each rank holds only a partition of the weights (ZeRO-3)."""
        return False

    def set_lr(self, lr: float) -> None:
        for g in self.optimizer.param_groups:
            g['lr'] = lr

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def boundary(self, last: bool) -> None:
        """Called before each micro-batch's forward: whether it is the request's last (a step boundary)."""

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm if self.max_grad_norm > 0 else float('inf'))
        self.optimizer.step()
        return float(norm)

    def gathered_state_dict(self) -> Optional[Dict[str, torch.Tensor]]:
        """Full weights when the module's own are partitioned (ZeRO-3); None: the module holds them."""
        return None

    def save(self, out_dir: Path, step: int) -> None:
        if is_main():
            tmp = out_dir / (OPTIMIZER_FILE + '.tmp')
            torch_files.save({'optimizer': self.optimizer.state_dict(), 'step': step}, tmp)
            tmp.replace(out_dir / OPTIMIZER_FILE)

    def load(self, model_dir: Path) -> Optional[int]:
        """Restores the optimizer saved in model_dir; the step it was at, or None when there is none."""
        saved = model_dir / OPTIMIZER_FILE
        if not saved.is_file():
            return None
        state = torch.load(saved, map_location='cpu')
        self.optimizer.load_state_dict(state['optimizer'])
        return int(state['step'])


class DeepSpeedUpdater(PlainUpdater):
    """ZeRO through deepspeed.initialize; the engine owns the optimizer and clipping."""

    def __init__(self, module: nn.Module, s: OptimSettings, config: Dict[str, Any]):
        import deepspeed
        super().__init__(module, s)
        # Every rank runs the whole request (same batch): ZeRO partitions optimizer state, gradients and
        # (stage 3) weights across ranks; the averaged gradient equals the single-process one.
        cfg = {'gradient_accumulation_steps': 1, 'train_micro_batch_size_per_gpu': 1,
               'gradient_clipping': s.max_grad_norm, 'zero_allow_untested_optimizer': True, **config}
        self.engine, self.optimizer, _, _ = deepspeed.initialize(model=module, optimizer=self.optimizer, config=cfg)
        self.stage = int(cfg.get('zero_optimization', {}).get('stage', 0))

    @property
    def partitioned(self) -> bool:
        return self.stage == 3

    def zero_grad(self) -> None:
        self.engine.zero_grad()

    def boundary(self, last: bool) -> None:
        # Micro-batches of one request are accumulated; only the last one is a step boundary. Set
        # before the forward: ZeRO-3 would otherwise drop the gradients of earlier micro-batches.
        if self.stage == 3 and not last:
            # Measured with DeepSpeed 0.19.8 on CPU: the update then only reflects the last micro-batch.
            raise ValueError('DeepSpeed ZeRO-3 here takes one micro-batch per request (earlier micro-batches '
                             'lose their gradients): raise micro_batch_size / micro_batch_tokens to the whole batch')
        self.engine.set_gradient_accumulation_boundary(last)

    def backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss, scale_wrt_gas=False)

    def step(self) -> float:
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float('nan')

    def gathered_state_dict(self) -> Optional[Dict[str, torch.Tensor]]:
        # Collective: every rank takes part, rank 0 gets the 16-bit weights.
        return self.engine._zero3_consolidated_16bit_state_dict() if self.stage == 3 else None

    def save(self, out_dir: Path, step: int) -> None:
        self.engine.save_checkpoint(str(out_dir / DEEPSPEED_DIR), tag='engine', client_state={'step': step})

    def load(self, model_dir: Path) -> Optional[int]:
        if not (model_dir / DEEPSPEED_DIR).is_dir():
            return None
        _, client = self.engine.load_checkpoint(str(model_dir / DEEPSPEED_DIR), tag='engine', load_module_strict=False)
        return int(client['step'])


def make_updater(module: nn.Module, s: OptimSettings, deepspeed_config: Optional[Dict[str, Any]]) -> PlainUpdater:
    if deepspeed_config is None:
        return PlainUpdater(module, s)
    try:
        import deepspeed  # noqa: F401
    except ImportError as e:
        raise RuntimeError(f'a deepspeed config was given but deepspeed is not importable: {e}') from e
    return DeepSpeedUpdater(module, s, deepspeed_config)

"""Parameter updates: plain torch AdamW with grad-norm clipping, or DeepSpeed when configured.

Both take the loss of each micro-batch (already scaled by whole-batch normalizers) and step
once per request, returning the gradient norm before clipping.
"""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn


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

    def set_lr(self, lr: float) -> None:
        for g in self.optimizer.param_groups:
            g['lr'] = lr

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        loss.backward()

    def step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm if self.max_grad_norm > 0 else float('inf'))
        self.optimizer.step()
        return float(norm)

    def state_dict(self) -> Dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)


class DeepSpeedUpdater(PlainUpdater):
    """ZeRO through deepspeed.initialize; the engine owns the optimizer and clipping."""

    def __init__(self, module: nn.Module, s: OptimSettings, config: Dict[str, Any]):
        import deepspeed
        super().__init__(module, s)
        cfg = {'gradient_accumulation_steps': 1, 'train_micro_batch_size_per_gpu': 1,
               'gradient_clipping': s.max_grad_norm, **config}
        self.engine, self.optimizer, _, _ = deepspeed.initialize(model=module, optimizer=self.optimizer, config=cfg)

    def zero_grad(self) -> None:
        self.engine.zero_grad()

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        # Micro-batches of one request are accumulated; only the last one is a step boundary.
        self.engine.set_gradient_accumulation_boundary(last)
        self.engine.backward(loss, scale_wrt_gas=False)

    def step(self) -> float:
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float('nan')


def make_updater(module: nn.Module, s: OptimSettings, deepspeed_config: Optional[Dict[str, Any]]) -> PlainUpdater:
    if deepspeed_config is None:
        return PlainUpdater(module, s)
    try:
        import deepspeed  # noqa: F401
    except ImportError as e:
        raise RuntimeError(f'a deepspeed config was given but deepspeed is not importable: {e}') from e
    return DeepSpeedUpdater(module, s, deepspeed_config)

"""Parameter updates: plain torch AdamW with grad-norm clipping, or DeepSpeed when configured.

Both run the training forward of a micro-batch (`forward`), take its loss (already scaled by
whole-batch normalizers and by the number of ranks) and step once per request, returning the
gradient norm before clipping. With several ranks each runs its share of the micro-batches and
the gradients are averaged over the ranks, so the update is that of one process over the whole
batch. `reset` starts a new optimizer (no moments, step count 0): RL after SFT should not
inherit SFT's Adam moments (grpo.optimizer.reset). The optimizer's tag (which reset it comes
from) is saved with the checkpoint and restored with it.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn

from . import torch_files
from .distributed import is_main, single_rank_group

OPTIMIZER_FILE = 'optimizer.pt'
# A DeepSpeed checkpoint's optimizer partitions, one file per rank.
DEEPSPEED_DIR = 'deepspeed'
# The name of the policy inside the module the updater trains (logprobs.LogprobModel.model).
MODEL_PREFIX = 'model.'


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

    def adamw(self, params: List[nn.Parameter], lr: Optional[float] = None, fused: bool = False) -> torch.optim.AdamW:
        return torch.optim.AdamW(
            params,
            lr=self.lr if lr is None else lr,
            betas=self.betas,
            eps=self.eps,
            weight_decay=self.weight_decay,
            fused=fused or None,  # None: torch's default (foreach); False would pick its per-weight loop
        )


def can_fuse(params: List[nn.Parameter]) -> bool:
    """Whether torch's fused AdamW kernel takes these weights: floating point, all on one CPU or CUDA device.

    It makes the whole update one pass per weight where the default (foreach) kernels make one pass over
    all weights per operation: on the tiny model AdamW's step took 0.38-0.43x the default's time and the SFT
    step 0.95-0.98x (scripts/bench/sft-optimizer.py; docs/experiments.md, issue 29 experiment 30); the same
    update up to rounding.
    """
    devices = {p.device for p in params}
    return (
        len(devices) == 1 and next(iter(devices)).type in ('cpu', 'cuda') and all(p.is_floating_point() for p in params)
    )


@dataclass
class Saved:
    """What a checkpoint records of the optimizer besides its state: the update count and the optimizer's tag."""

    step: int
    tag: Optional[str]


class PlainUpdater:
    """torch AdamW on this process's full copy of the weights; with several ranks, gradients are averaged by all-reduce."""

    def __init__(self, module: nn.Module, s: OptimSettings, fused: Optional[bool] = None):
        self.module = module
        self.settings = s
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.fused = can_fuse(self.params) if fused is None else fused
        self.optimizer = s.adamw(self.params, fused=self.fused)
        self.max_grad_norm = s.max_grad_norm
        self.world = dist.get_world_size() if dist.is_initialized() else 1

    @property
    def partitioned(self) -> bool:
        """Whether each rank holds only a partition of the weights (ZeRO-3)."""
        return False

    def set_lr(self, lr: float) -> None:
        for g in self.optimizer.param_groups:
            g['lr'] = lr

    def reset(self) -> None:
        """A new AdamW at the current learning rate: no moments, step count 0."""
        self.optimizer = self.settings.adamw(self.params, lr=self.optimizer.param_groups[0]['lr'], fused=self.fused)

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def boundary(self, last: bool) -> None:
        """Called before each micro-batch's forward: whether it is the request's last (a step boundary)."""

    def forward(self, *inputs: Any) -> torch.Tensor:
        return self.module(*inputs)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def reduce(self) -> None:
        """After the request's last backward: the gradients averaged over the ranks (DeepSpeed reduces in backward)."""
        if self.world == 1:
            return
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in self.params])
        dist.all_reduce(flat)
        flat /= self.world
        at = 0
        for p in self.params:
            p.grad.copy_(flat[at : at + p.numel()].view_as(p))
            at += p.numel()

    def full_gradients(self) -> Dict[str, torch.Tensor]:
        """Each trainable weight's whole gradient (between `reduce` and `step`), for checking data parallelism."""
        return {
            n[len(MODEL_PREFIX) :]: p.grad.detach().clone()
            for n, p in self.module.named_parameters()
            if p.requires_grad
        }

    def step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(
            self.params, self.max_grad_norm if self.max_grad_norm > 0 else float('inf')
        )
        self.optimizer.step()
        return float(norm)

    def gathered_state_dict(self) -> Optional[Dict[str, torch.Tensor]]:
        """Full weights when the module's own are partitioned (ZeRO-3); None: the module holds them."""
        return None

    def save(self, out_dir: Path, saved: Saved) -> None:
        if is_main():
            tmp = out_dir / (OPTIMIZER_FILE + '.tmp')
            torch_files.save({'optimizer': self.optimizer.state_dict(), 'step': saved.step, 'tag': saved.tag}, tmp)
            tmp.replace(out_dir / OPTIMIZER_FILE)

    def load(self, model_dir: Path) -> Optional[Saved]:
        """Restores the optimizer saved in model_dir; what the checkpoint recorded, or None when there is none."""
        path = model_dir / OPTIMIZER_FILE
        if not path.is_file():
            return None
        state = torch.load(path, map_location='cpu')
        self.optimizer.load_state_dict(state['optimizer'])
        return Saved(int(state['step']), state.get('tag'))


class DeepSpeedUpdater(PlainUpdater):
    """ZeRO through deepspeed.initialize; the engine owns the optimizer, clipping and the ranks' gradient averaging."""

    def __init__(self, module: nn.Module, s: OptimSettings, config: Dict[str, Any]):
        import deepspeed

        # ZeRO replaces the optimizer's weights with its own flat partitions: it gets the kernels it was built on.
        super().__init__(module, s, fused=False)
        # One micro-batch per backward as DeepSpeed counts them: the engine splits a request into micro-batches
        # itself and marks the last as the step boundary (`boundary`).
        cfg = {
            'gradient_accumulation_steps': 1,
            'train_micro_batch_size_per_gpu': 1,
            'gradient_clipping': s.max_grad_norm,
            'zero_allow_untested_optimizer': True,
            **config,
        }
        single_rank_group()
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=module, optimizer=self.optimizer, config=cfg, dist_init_required=False
        )
        self.stage = int(cfg.get('zero_optimization', {}).get('stage', 0))

    @property
    def partitioned(self) -> bool:
        return self.stage == 3

    def reset(self) -> None:
        # ZeRO's optimizer wraps a torch AdamW over this rank's fp32 partitions, whose state is created at its
        # first step (DeepSpeed initialises it lazily too): emptying it is what a new engine starts from.
        self.optimizer.optimizer.state.clear()

    def zero_grad(self) -> None:
        self.engine.zero_grad()

    def boundary(self, last: bool) -> None:
        self.engine.set_gradient_accumulation_boundary(last)

    def forward(self, *inputs: Any) -> torch.Tensor:
        return self.engine(*inputs)

    def backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss, scale_wrt_gas=False)

    def reduce(self) -> None:
        """Done: the boundary micro-batch's backward reduced the gradients over the ranks."""

    def full_gradients(self) -> Dict[str, torch.Tensor]:
        from deepspeed.utils import safe_get_full_grad

        # Collective under ZeRO: every rank takes part in assembling each gradient.
        return {
            n[len(MODEL_PREFIX) :]: safe_get_full_grad(p).detach().float().clone()
            for n, p in self.module.named_parameters()
            if p.requires_grad
        }

    def step(self) -> float:
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float('nan')

    def gathered_state_dict(self) -> Optional[Dict[str, torch.Tensor]]:
        if self.stage != 3:
            return None
        # Collective: every rank takes part, rank 0 gets the 16-bit weights (named inside LogprobModel).
        state = self.engine._zero3_consolidated_16bit_state_dict()
        return None if state is None else {k[len(MODEL_PREFIX) :]: v for k, v in state.items()}

    def save(self, out_dir: Path, saved: Saved) -> None:
        # Frozen weights (a LoRA run's base) are the model dir's own: a checkpoint of them would be GBs per save.
        self.engine.save_checkpoint(
            str(out_dir / DEEPSPEED_DIR),
            tag='engine',
            client_state={'step': saved.step, 'tag': saved.tag},
            exclude_frozen_parameters=True,
        )

    def load(self, model_dir: Path) -> Optional[Saved]:
        if not (model_dir / DEEPSPEED_DIR).is_dir():
            return None
        _, client = self.engine.load_checkpoint(str(model_dir / DEEPSPEED_DIR), tag='engine', load_module_strict=False)
        return Saved(int(client['step']), client.get('tag'))


def make_updater(module: nn.Module, s: OptimSettings, deepspeed_config: Optional[Dict[str, Any]]) -> PlainUpdater:
    """module: the policy as logprobs.LogprobModel (its weights are named MODEL_PREFIX + the model's names)."""
    if deepspeed_config is None:
        return PlainUpdater(module, s)
    try:
        import deepspeed  # noqa: F401
    except ImportError as e:
        raise RuntimeError(f'a deepspeed config was given but deepspeed is not importable: {e}') from e
    return DeepSpeedUpdater(module, s, deepspeed_config)

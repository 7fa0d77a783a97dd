"""The frozen KL reference policy: taken by `set_reference`, saved with checkpoints, restored on resume.

Full models keep a frozen copy of the weights. LoRA keeps a copy of the adapter weights only and
swaps it into the live adapter for the reference forward, so the base is never held twice; taken
right after wrapping (B = 0), that reference is the base model with its adapters disabled.
"""

import contextlib
import copy
from pathlib import Path
from typing import Dict, Iterator, Optional

import torch
from torch import nn

from . import torch_files
from .models import PolicyModel

# A directory, so that copies of a model dir's plain files (tokenizer, chat template) never carry it along.
REFERENCE_FILE = Path('reference') / 'reference.pt'


def _trainable(module: nn.Module) -> Dict[str, nn.Parameter]:
    return {n: p for n, p in module.named_parameters() if p.requires_grad}


class Reference:
    def __init__(self, policy: PolicyModel, partitioned: bool):
        self.policy = policy
        # ZeRO-3 leaves each rank a partition of every weight: a copy of that is no model.
        self.partitioned = partitioned
        self.tag: Optional[str] = None
        self._frozen: Optional[nn.Module] = None
        self._adapter: Optional[Dict[str, torch.Tensor]] = None

    def take(self, tag: str) -> None:
        """Freezes the current policy as the reference, named by `tag` (e.g. the stage it was taken at)."""
        if not isinstance(tag, str) or not tag:
            raise ValueError('set_reference: tag must be a non-empty string')
        self._frozen, self._adapter = None, None  # release the previous copy first
        if self.policy.lora:
            self._adapter = {n: p.detach().clone() for n, p in _trainable(self.policy.module).items()}
        elif self.partitioned:
            raise ValueError(
                'set_reference: DeepSpeed ZeRO-3 full fine-tuning keeps no whole copy of the policy; '
                'use LoRA (the reference is an adapter copy), ZeRO-2, or pass ref log-probabilities'
            )
        else:
            self._frozen = copy.deepcopy(self.policy.module).eval().requires_grad_(False)
        self.tag = tag

    @contextlib.contextmanager
    def module(self) -> Iterator[nn.Module]:
        """The reference model for a no-grad forward."""
        if self.tag is None:
            raise ValueError('no reference policy: send set_reference first, or pass ref log-probabilities')
        if self._frozen is not None:
            yield self._frozen
            return
        adapter = self._adapter
        assert adapter is not None  # take() holds a frozen copy or an adapter copy
        live = _trainable(self.policy.module)
        current = {n: p.detach().clone() for n, p in live.items()}
        training = self.policy.module.training
        try:
            with torch.no_grad():
                for n, p in live.items():
                    p.copy_(adapter[n])
            yield self.policy.module.eval()
        finally:
            with torch.no_grad():
                for n, p in live.items():
                    p.copy_(current[n])
            self.policy.module.train(training)

    def save(self, out_dir: Path) -> None:
        if self.tag is None:
            return
        weights = self._adapter if self._frozen is None else self._frozen.state_dict()
        path = out_dir / REFERENCE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix('.tmp')
        torch_files.save({'tag': self.tag, 'lora': self.policy.lora, 'weights': weights}, tmp)
        tmp.replace(path)

    def load(self, model_dir: Path) -> None:
        """Restores the reference saved with a checkpoint, if there is one."""
        path = model_dir / REFERENCE_FILE
        if not path.is_file():
            return
        state = torch.load(path, map_location='cpu')
        if bool(state.get('lora')) != self.policy.lora:
            raise ValueError(
                f'{path}: saved for a {"LoRA" if state.get("lora") else "full"} policy, '
                f'but the loaded policy is {"LoRA" if self.policy.lora else "full"}'
            )
        self.take(str(state['tag']))
        if self._adapter is not None:
            missing = set(self._adapter) ^ set(state['weights'])
            if missing:
                raise ValueError(f'{path}: adapter weights do not match the loaded adapter ({sorted(missing)[:3]})')
            for n, w in state['weights'].items():
                self._adapter[n].copy_(w)
        elif self._frozen is not None:
            self._frozen.load_state_dict(state['weights'])

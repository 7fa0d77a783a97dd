"""The loaded policy and its updates: log-probabilities, SFT step, GRPO step, checkpoints.

Every per-token array is aligned with the token ids of its sequence (position 0 carries no
prediction). Log-probabilities are those of the temperature-scaled distribution each sequence
was sampled from. Missing old log-probabilities mean on-policy data (old = current policy,
detached); missing reference log-probabilities come from the reference policy, a frozen copy of
the policy taken by `set_reference` (e.g. at the start of GRPO), saved with every checkpoint
and restored on resume.
"""
import contextlib
import copy
import logging
import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from .batch import check_ragged, micro_batches, pad, temperatures, token_logprobs, unpad
from .grpo_loss import LossSettings, Normalizers, grpo_loss, sft_loss
from .models import load_model
from .optim import OptimSettings, make_updater
from .precision import master_dtype, resolve_compute, set_threads

OPTIMIZER_FILE = 'optimizer.pt'
# A directory, so that model-dir copies (PolicyModel.save copies plain files) never carry it along.
REFERENCE_FILE = Path('reference') / 'reference.pt'

log = logging.getLogger('thinkfl_engine')


class Trainer:
    def __init__(self, args: Dict[str, Any]):
        if 'seed' in args:
            torch.manual_seed(int(args['seed']))
        self.model_dir = Path(args['model_dir'])
        self.device = torch.device(args.get('device', 'cpu'))
        self.threads = set_threads(args.get('threads'))
        # `autocast` overrides the compute precision `dtype` (the model's); weights stay master_dtype.
        compute, self.precision_reason = resolve_compute(args.get('autocast') or args.get('dtype', 'float32'),
                                                         self.device)
        self.master = master_dtype(compute)
        self.autocast = None if compute == self.master else compute
        log.info('compute precision %s; %d threads', self.precision_reason, self.threads)
        self.policy = load_model(self.model_dir, self.device, self.master)
        self.vocab_size = self.policy.module.get_input_embeddings().num_embeddings
        self.reference: Optional[torch.nn.Module] = None
        self.reference_tag: Optional[str] = None
        self.updater = make_updater(self.policy.module, OptimSettings.from_json(args.get('optimizer')),
                                    args.get('deepspeed'))
        self.step = 0
        if args.get('resume', False):
            saved = self.model_dir / OPTIMIZER_FILE
            if saved.is_file():
                state = torch.load(saved, map_location='cpu')
                self.updater.load_state_dict(state['optimizer'])
                self.step = int(state['step'])
            ref = self.model_dir / REFERENCE_FILE
            if ref.is_file():
                state = torch.load(ref, map_location='cpu')
                self._new_reference(str(state['tag'])).load_state_dict(state['weights'])

    def describe(self) -> Dict[str, Any]:
        params = sum(p.numel() for p in self.policy.module.parameters())
        return {'kind': self.policy.kind, 'parameters': params, 'device': str(self.device), 'step': self.step,
                'compute_dtype': str(self.autocast or self.master).replace('torch.', ''),
                'precision': self.precision_reason, 'threads': self.threads, 'reference': self.reference_tag}

    def _new_reference(self, tag: str) -> torch.nn.Module:
        self.reference = None  # release the previous copy first
        self.reference = copy.deepcopy(self.policy.module).eval().requires_grad_(False)
        self.reference_tag = tag
        return self.reference

    def set_reference(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Freezes a copy of the current policy as the KL reference, named by `tag` (e.g. the stage it was taken at)."""
        tag = args['tag']
        if not isinstance(tag, str) or not tag:
            raise ValueError('set_reference: tag must be a non-empty string')
        self._new_reference(tag)
        return {'reference': tag, 'step': self.step}

    def _amp(self):
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast)

    def _forward(self, module, ids: List[List[int]], temperature: List[float]) -> torch.Tensor:
        top = max(max(r) for r in ids)
        if top >= self.vocab_size:
            raise ValueError(f'input_ids: token id {top} is outside the model vocabulary ({self.vocab_size})')
        lengths = [len(r) for r in ids]
        t = pad(ids, torch.long, self.device)
        am = (torch.arange(t.shape[1], device=self.device)[None] < torch.tensor(lengths, device=self.device)[:, None]).long()
        with self._amp():
            logits = self.policy.logits(module, t, am)
        return token_logprobs(logits, t, torch.tensor(temperature, device=self.device))

    def logprobs(self, args: Dict[str, Any]) -> Dict[str, Any]:
        ids = validate_ids(args['input_ids'])
        module = self.policy.module if args.get('model', 'policy') == 'policy' else self._reference()
        temps = temperatures(args.get('temperature', 1.0), len(ids))
        out: List[List[float]] = []
        with torch.no_grad():
            for r in micro_batches(len(ids), args.get('micro_batch_size')):
                rows = [ids[i] for i in r]
                out += unpad(self._forward(module, rows, [temps[i] for i in r]), [len(x) for x in rows])
        return {'logprobs': out}

    def _reference(self):
        if self.reference is None:
            raise ValueError('no reference policy: send set_reference first, or pass ref log-probabilities')
        return self.reference

    def sft_step(self, args: Dict[str, Any]) -> Dict[str, Any]:
        ids = validate_ids(args['input_ids'])
        mask = validate_mask(args['mask'], ids)
        norm = Normalizers.of(pad(mask, torch.float32, torch.device('cpu')))
        totals = self._accumulate(ids, args, lambda r, lp, m: {'loss': sft_loss(lp, m, norm)}, mask)
        return {**totals, 'tokens': int(sum(map(sum, mask)))}

    def grpo_step(self, args: Dict[str, Any]) -> Dict[str, Any]:
        ids = validate_ids(args['input_ids'])
        mask = validate_mask(args['mask'], ids)
        lengths = [len(r) for r in ids]
        adv = [float(a) for a in args['advantages']]
        if len(adv) != len(ids) or not all(math.isfinite(a) for a in adv):
            raise ValueError(f'advantages: need {len(ids)} finite values, one per sequence')
        settings = LossSettings.from_json(args.get('loss'))
        for key in ('old', 'ref'):
            if args.get(key) is not None:
                check_ragged(key, args[key], lengths)
        temps = temperatures(args.get('temperature', 1.0), len(ids))
        norm = Normalizers.of(pad(mask, torch.float32, torch.device('cpu')))

        def loss_of(r: range, logp: torch.Tensor, m: torch.Tensor) -> Dict[str, torch.Tensor]:
            old = self._given(args.get('old'), r) if args.get('old') is not None else logp.detach()
            ref = None
            if settings.kl_coef != 0.0:
                if args.get('ref') is not None:
                    ref = self._given(args['ref'], r)
                else:
                    with torch.no_grad():
                        ref = self._forward(self._reference(), [ids[i] for i in r], [temps[i] for i in r])
            a = torch.tensor([adv[i] for i in r], dtype=torch.float32, device=self.device)
            return grpo_loss(logp, old, ref, m, a, settings, norm)

        totals = self._accumulate(ids, args, loss_of, mask, temps)
        return {**totals, 'tokens': int(sum(map(sum, mask)))}

    def _given(self, rows: List[List[float]], r: range) -> torch.Tensor:
        return pad([rows[i] for i in r], torch.float32, self.device)

    def _accumulate(self, ids, args, loss_of, mask, temps: Optional[List[float]] = None) -> Dict[str, Any]:
        """One optimizer step over all micro-batches; metrics are sums of whole-batch-normalised parts."""
        if args.get('lr') is not None:
            self.updater.set_lr(float(args['lr']))
        self.policy.module.train()
        self.updater.zero_grad()
        parts = micro_batches(len(ids), args.get('micro_batch_size'))
        totals: Dict[str, float] = {}
        for k, r in enumerate(parts):
            logp = self._forward(self.policy.module, [ids[i] for i in r], [temps[i] if temps else 1.0 for i in r])
            m = pad([mask[i] for i in r], torch.float32, self.device)
            out = loss_of(r, logp, m)
            self.updater.backward(out['loss'], last=k == len(parts) - 1)
            for name, v in out.items():
                totals[name] = totals.get(name, 0.0) + float(v.detach())
        if not math.isfinite(totals['loss']):
            self.updater.zero_grad()
            raise FloatingPointError(f'non-finite loss {totals["loss"]}; step skipped')
        totals['grad_norm'] = self.updater.step()
        self.step += 1
        totals['step'] = self.step
        return totals

    def save(self, out_dir: Path) -> Dict[str, Any]:
        self.policy.save(out_dir)
        tmp = out_dir / (OPTIMIZER_FILE + '.tmp')
        torch.save({'optimizer': self.updater.state_dict(), 'step': self.step}, tmp)
        tmp.replace(out_dir / OPTIMIZER_FILE)
        if self.reference is not None:
            ref = out_dir / REFERENCE_FILE
            ref.parent.mkdir(parents=True, exist_ok=True)
            tmp = ref.with_suffix('.tmp')
            torch.save({'tag': self.reference_tag, 'weights': self.reference.state_dict()}, tmp)
            tmp.replace(ref)
        return {'dir': str(out_dir), 'step': self.step, 'reference': self.reference_tag}


def validate_ids(ids: Any) -> List[List[int]]:
    if not isinstance(ids, list) or not ids:
        raise ValueError('input_ids: need a non-empty list of token id lists')
    for i, row in enumerate(ids):
        if not isinstance(row, list) or len(row) < 2 or not all(isinstance(x, int) and x >= 0 for x in row):
            raise ValueError(f'input_ids[{i}]: need at least 2 non-negative integer token ids')
    return ids


def validate_mask(mask: Any, ids: List[List[int]]) -> List[List[int]]:
    check_ragged('mask', mask, [len(r) for r in ids])
    for i, row in enumerate(mask):
        if any(v not in (0, 1) for v in row):
            raise ValueError(f'mask[{i}]: values must be 0 or 1')
        if row[0]:
            raise ValueError(f'mask[{i}][0] is 1: the first token has no prediction, it cannot be trained on')
    return mask

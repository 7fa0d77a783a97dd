"""The loaded policy and its updates: log-probabilities, SFT step, GRPO step, checkpoints.

Every per-token array is aligned with the token ids of its sequence (position 0 carries no
prediction). Log-probabilities are those of the temperature-scaled distribution each sequence
was sampled from, computed from hidden states in chunks of `logprob_chunk` tokens; micro-batches
hold at most `micro_batch_size` sequences and `micro_batch_tokens` padded tokens. Missing old
log-probabilities mean on-policy data (old = current policy, detached); missing reference
log-probabilities come from the reference policy taken by `set_reference` (e.g. at the start of
GRPO), saved with every checkpoint and restored on resume (reference.py).
"""
import contextlib
import logging
import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from .batch import check_ragged, micro_batches, pad, temperatures, unpad
from .distributed import is_main, rank_device
from .grpo_loss import LossSettings, Normalizers, grpo_loss, sft_loss
from .logprobs import DEFAULT_CHUNK, token_logprobs
from .lora import LoraSettings
from .models import load_model
from .optim import OptimSettings, make_updater
from .precision import master_dtype, resolve_compute, set_threads
from .reference import Reference

log = logging.getLogger('thinkfl_engine')


class Trainer:
    def __init__(self, args: Dict[str, Any]):
        if 'seed' in args:
            torch.manual_seed(int(args['seed']))
        self.model_dir = Path(args['model_dir'])
        self.device = rank_device(args.get('device', 'cpu'))
        self.threads = set_threads(args.get('threads'))
        # `autocast` overrides the compute precision `dtype` (the model's); weights stay master_dtype.
        compute, self.precision_reason = resolve_compute(args.get('autocast') or args.get('dtype', 'float32'),
                                                         self.device)
        self.master = master_dtype(compute)
        self.autocast = None if compute == self.master else compute
        log.info('compute precision %s; %d threads', self.precision_reason, self.threads)
        self.policy = load_model(self.model_dir, self.device, self.master, lora=LoraSettings.from_json(args.get('lora')),
                                 gradient_checkpointing=bool(args.get('gradient_checkpointing', True)))
        self.vocab_size = self.policy.module.get_input_embeddings().num_embeddings
        self.chunk = int(args.get('logprob_chunk', DEFAULT_CHUNK))
        self.updater = make_updater(self.policy.module, OptimSettings.from_json(args.get('optimizer')),
                                    args.get('deepspeed'))
        self.reference = Reference(self.policy, self.updater.partitioned)
        self.step = 0
        if args.get('resume', False):
            self.step = self.updater.load(self.model_dir) or 0
            self.reference.load(self.model_dir)

    def describe(self) -> Dict[str, Any]:
        # ZeRO-3 leaves each rank a partition: ds_numel is the full size.
        sizes = [(getattr(p, 'ds_numel', p.numel()), p.requires_grad) for p in self.policy.module.parameters()]
        params = sum(n for n, _ in sizes)
        trainable = sum(n for n, grad in sizes if grad)
        return {'kind': self.policy.kind, 'parameters': params, 'trainable_parameters': trainable,
                'lora': self.policy.lora, 'device': str(self.device), 'step': self.step,
                'compute_dtype': str(self.autocast or self.master).replace('torch.', ''),
                'precision': self.precision_reason, 'threads': self.threads, 'reference': self.reference.tag}

    def set_reference(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Freezes the current policy as the KL reference, named by `tag` (e.g. the stage it was taken at)."""
        self.reference.take(args['tag'])
        return {'reference': self.reference.tag, 'step': self.step}

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
            hidden = self.policy.hidden(module, t, am)
            return token_logprobs(hidden, self.policy.head(module), t, temperature, self.chunk)[0]

    def logprobs(self, args: Dict[str, Any]) -> Dict[str, Any]:
        ids = validate_ids(args['input_ids'])
        temps = temperatures(args.get('temperature', 1.0), len(ids))
        return {'logprobs': self._no_grad_logprobs(args.get('model', 'policy'), ids, temps, args)}

    def _no_grad_logprobs(self, model: str, ids: List[List[int]], temps: List[float], args: Dict[str, Any]) -> List[List[float]]:
        out: List[List[float]] = []
        with torch.no_grad(), self.model_scope(model) as module:
            for r in self._micro_batches(ids, args):
                rows = [ids[i] for i in r]
                out += unpad(self._forward(module, rows, [temps[i] for i in r]), [len(x) for x in rows])
        return out

    def model_scope(self, name: str):
        if name == 'policy':
            return contextlib.nullcontext(self.policy.module)
        if name == 'reference':
            return self.reference.module()
        raise ValueError(f"model must be 'policy' or 'reference', got {name!r}")

    def _micro_batches(self, ids: List[List[int]], args: Dict[str, Any]) -> List[range]:
        return micro_batches([len(r) for r in ids], args.get('micro_batch_size'), args.get('micro_batch_tokens'))

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
        ref_rows = args.get('ref')
        if settings.kl_coef != 0.0 and ref_rows is None:
            # Before any policy forward: a LoRA reference swaps adapter weights that the backward still needs.
            ref_rows = self._no_grad_logprobs('reference', ids, temps, args)

        def loss_of(r: range, logp: torch.Tensor, m: torch.Tensor) -> Dict[str, torch.Tensor]:
            old = self._given(args['old'], r) if args.get('old') is not None else logp.detach()
            ref = self._given(ref_rows, r) if settings.kl_coef != 0.0 else None
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
        parts = self._micro_batches(ids, args)
        totals: Dict[str, float] = {}
        for k, r in enumerate(parts):
            self.updater.boundary(last=k == len(parts) - 1)
            logp = self._forward(self.policy.module, [ids[i] for i in r], [temps[i] if temps else 1.0 for i in r])
            m = pad([mask[i] for i in r], torch.float32, self.device)
            out = loss_of(r, logp, m)
            self.updater.backward(out['loss'])
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
        self.write_model(out_dir, merged=False)
        self.updater.save(out_dir, self.step)
        if is_main():
            self.reference.save(out_dir)
        return {'dir': str(out_dir), 'step': self.step, 'reference': self.reference.tag}

    def write_model(self, out_dir: Path, merged: bool) -> Path:
        """The model dir (rank 0 writes; under ZeRO-3 every rank helps gather the weights first).

        merged: returns the full model dir, out_dir or with LoRA its merged/ (models.save_merged).
        """
        state = self.updater.gathered_state_dict()
        if not is_main():
            return out_dir
        if merged:
            return self.policy.save_merged(out_dir, state)
        self.policy.save(out_dir, state)
        return out_dir


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

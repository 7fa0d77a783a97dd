"""The loaded policy and its updates: log-probabilities, SFT step, GRPO step, checkpoints.

Every per-token array is aligned with the token ids of its sequence (position 0 carries no
prediction). Log-probabilities are those of the temperature-scaled distribution each sequence
was sampled from, computed from hidden states in chunks of `logprob_chunk` tokens; micro-batches
hold at most `micro_batch_size` sequences and `micro_batch_tokens` padded tokens. With several
ranks each runs its share of a request's micro-batches (distributed.share_of_rank, balanced by
tokens): the loss normalizers are the whole batch's, every rank's loss is scaled by the number
of ranks, whose gradients are averaged, so the update equals one process's over the whole batch.
Missing old log-probabilities mean on-policy data (old = current policy, detached); missing
reference log-probabilities come from the reference policy taken by `set_reference` (e.g. at the
start of GRPO), saved with every checkpoint and restored on resume (reference.py).
"""

import contextlib
import json
import logging
import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from .batch import check_ragged, micro_batches, pad, temperatures, unpad
from .distributed import Ranks, is_main, rank_device, share_of_rank
from .grpo_loss import LossSettings, Normalizers, grpo_loss, sft_loss
from .logprobs import DEFAULT_CHUNK, LogprobModel, model_logprobs
from .lora import LoraSettings
from .models import load_model, parse_dtype
from .optim import OptimSettings, Saved, make_updater
from .precision import AutocastProbe, master_dtype, resolve_compute, set_threads
from .reference import Reference

log = logging.getLogger('thinkfl_engine')

# `auto` precision on CPU: the probe's sequence length and timed passes per precision (precision.measure).
PROBE_TOKENS = 1024
PROBE_REPS = 5
# The model config fields that set the cost of a pass (with LoRA, checkpointing, threads and probe length).
SHAPE_KEYS = (
    'model_type',
    'vocab_size',
    'hidden_size',
    'num_hidden_layers',
    'num_attention_heads',
    'num_key_value_heads',
    'head_dim',
    'intermediate_size',
)


class Trainer:
    def __init__(self, args: Dict[str, Any], ranks: Optional[Ranks] = None):
        self.ranks = ranks
        self.world = ranks.world if ranks else 1
        if 'seed' in args:
            torch.manual_seed(int(args['seed']))
        self.model_dir = Path(args['model_dir'])
        self.device = rank_device(args.get('device', 'cpu'))
        self.threads = set_threads(args.get('threads'))
        # `autocast` overrides the compute precision `dtype` (the model's); weights stay master_dtype.
        requested = args.get('autocast') or args.get('dtype', 'float32')
        measured = requested == 'auto' and self.device.type == 'cpu'
        if not measured:
            compute, self.precision_reason = resolve_compute(requested, self.device)
        self.master = torch.float32 if measured else master_dtype(compute)
        lora = LoraSettings.from_json(args.get('lora'))
        checkpointing = bool(args.get('gradient_checkpointing', True))
        self.policy = load_model(
            self.model_dir, self.device, self.master, lora=lora, gradient_checkpointing=checkpointing
        )
        self.vocab_size = self.policy.module.get_input_embeddings().num_embeddings
        self.chunk = int(args.get('logprob_chunk', DEFAULT_CHUNK))
        if measured:
            # Before DeepSpeed wraps the model: the probe runs the plain module, on rank 0 only.
            compute, self.precision_reason = self._measured_auto(args, lora, checkpointing)
        self.autocast = None if compute == self.master else compute
        log.info('compute precision %s; %d threads', self.precision_reason, self.threads)
        self.updater = make_updater(
            LogprobModel(self.policy.module, self.chunk),
            OptimSettings.from_json(args.get('optimizer')),
            args.get('deepspeed'),
        )
        self.reference = Reference(self.policy, self.updater.partitioned)
        self.step = 0
        # Which reset the optimizer's state dates from (reset_optimizer); None: from the load, as for SFT.
        self.optimizer_tag: Optional[str] = None
        if args.get('resume', False):
            saved = self.updater.load(self.model_dir) or Saved(0, None)
            self.step, self.optimizer_tag = saved.step, saved.tag
            self.reference.load(self.model_dir)

    def _measured_auto(self, args: Dict[str, Any], lora: Optional[LoraSettings], checkpointing: bool):
        """`auto` on CPU: rank 0's measured (or cached) choice, the same on every rank."""
        if self.ranks is not None and not self.ranks.main:
            shared = self.ranks.share(None)
            assert shared is not None, 'rank 0 shares its autocast choice'
            name, reason = json.loads(shared)
            return parse_dtype(name), reason
        settings = dict(args.get('autocast_probe') or {})
        unknown = set(settings) - {'tokens', 'reps'}
        if unknown:
            raise ValueError(f'autocast_probe: unknown keys {sorted(unknown)}')
        tokens, reps = int(settings.get('tokens', PROBE_TOKENS)), int(settings.get('reps', PROBE_REPS))
        if tokens < 2:
            raise ValueError(f'autocast_probe: tokens must be >= 2, got {tokens}')
        config = self.policy.module.config.to_dict()
        shape = {k: config.get(k) for k in SHAPE_KEYS}
        shape.update(
            lora=None if lora is None else vars(lora),
            gradient_checkpointing=checkpointing,
            threads=self.threads,
            tokens=tokens,
        )
        cache = args.get('autocast_cache')
        dtype, reason = AutocastProbe(Path(cache) if cache else None, shape, self._probe_step(tokens), reps).resolve()
        if self.ranks is not None:
            self.ranks.share(json.dumps([str(dtype).replace('torch.', ''), reason]))
        return dtype, reason

    def _probe_step(self, tokens: int):
        """One training pass (forward, backward) of the loaded policy at a compute dtype on a fixed `tokens`-long
        sequence whose last sixteenth is trained (an SFT or GRPO sample trains on its ~7% generated tokens);
        it leaves no gradient and restores the random state, so the run is the same with or without it."""
        module = self.policy.module
        ids = torch.tensor([[(t * 7919) % self.vocab_size for t in range(tokens)]], device=self.device)
        am = torch.ones_like(ids)
        needed = torch.zeros_like(ids, dtype=torch.bool)
        needed[:, -max(1, tokens // 16) :] = True

        def step(dtype: torch.dtype) -> None:
            rng, was_training = torch.get_rng_state(), module.training
            module.train()
            try:
                with torch.autocast(device_type=self.device.type, dtype=dtype, enabled=dtype != torch.float32):
                    logp = model_logprobs(module, ids, am, [1.0], self.chunk, needed)
                logp.sum().backward()
            finally:
                module.zero_grad(set_to_none=True)
                module.train(was_training)
                torch.set_rng_state(rng)

        return step

    def describe(self) -> Dict[str, Any]:
        # ZeRO-3 leaves each rank a partition: ds_numel is the full size.
        sizes = [(getattr(p, 'ds_numel', p.numel()), p.requires_grad) for p in self.policy.module.parameters()]
        params = sum(n for n, _ in sizes)
        trainable = sum(n for n, grad in sizes if grad)
        return {
            'kind': self.policy.kind,
            'parameters': params,
            'trainable_parameters': trainable,
            'lora': self.policy.lora,
            'device': str(self.device),
            'step': self.step,
            'compute_dtype': str(self.autocast or self.master).replace('torch.', ''),
            'precision': self.precision_reason,
            'threads': self.threads,
            'reference': self.reference.tag,
            'optimizer': self.optimizer_tag,
            'ranks': self.world,
        }

    def set_reference(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """Freezes the current policy as the KL reference, named by `tag` (e.g. the stage it was taken at)."""
        self.reference.take(args['tag'])
        return {'reference': self.reference.tag, 'step': self.step}

    def reset_optimizer(self, args: Dict[str, Any]) -> Dict[str, Any]:
        """A new optimizer (no moments, step count 0), named by `tag` (e.g. the GRPO stage it starts)."""
        tag = args['tag']
        if not isinstance(tag, str) or not tag:
            raise ValueError('reset_optimizer: tag must be a non-empty string')
        self.updater.reset()
        self.optimizer_tag = tag
        log.info('optimizer reset (%s): no state before update %d', tag, self.step)
        return {'optimizer': tag, 'step': self.step}

    def _amp(self):
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast)

    def _inputs(self, ids: List[List[int]]):
        top = max(max(r) for r in ids)
        if top >= self.vocab_size:
            raise ValueError(f'input_ids: token id {top} is outside the model vocabulary ({self.vocab_size})')
        lengths = [len(r) for r in ids]
        t = pad(ids, torch.long, self.device)
        am = (
            torch.arange(t.shape[1], device=self.device)[None] < torch.tensor(lengths, device=self.device)[:, None]
        ).long()
        return t, am

    def _needed(self, mask: Optional[List[List[int]]]) -> Optional[torch.Tensor]:
        return None if mask is None else pad(mask, torch.bool, self.device)

    def _forward(
        self, module, ids: List[List[int]], temperature: List[float], mask: Optional[List[List[int]]] = None
    ) -> torch.Tensor:
        """No-grad log-probabilities of the policy or the reference (where `mask` is 1 only, when given)."""
        t, am = self._inputs(ids)
        with self._amp():
            return model_logprobs(module, t, am, temperature, self.chunk, self._needed(mask))

    def _train_forward(
        self, ids: List[List[int]], temperature: List[float], mask: Optional[List[List[int]]] = None
    ) -> torch.Tensor:
        """The policy's log-probabilities through the updater (DeepSpeed's engine forward under ZeRO), where
        `mask` is 1 only when given: a loss masks every other position, so its gradient there is 0 anyway."""
        t, am = self._inputs(ids)
        with self._amp():
            return self.updater.forward(t, am, temperature, self._needed(mask))

    def logprobs(self, args: Dict[str, Any]) -> Dict[str, Any]:
        ids = validate_ids(args['input_ids'])
        temps = temperatures(args.get('temperature', 1.0), len(ids))
        plan = self._plan(ids, args)
        mine = self._no_grad_logprobs(args.get('model', 'policy'), ids, temps, plan)
        rows: Dict[int, List[float]] = {}
        for part in self.ranks.gather(mine) if self.ranks else [mine]:
            rows.update(part)
        return {'logprobs': [rows[i] for i in range(len(ids))]}

    def _no_grad_logprobs(
        self,
        model: str,
        ids: List[List[int]],
        temps: List[float],
        plan: List[Optional[range]],
        mask: Optional[List[List[int]]] = None,
    ) -> Dict[int, List[float]]:
        """Log-probabilities of the rows of this rank's micro-batches, by row index (0 where `mask`, when given, is 0)."""
        out: Dict[int, List[float]] = {}
        with torch.no_grad(), self.model_scope(model) as module:
            for r in plan:
                if r is None:
                    # Runs the forward all ranks join under ZeRO-3 (it gathers weights), on a 2-token stand-in.
                    self._forward(module, [ids[0][:2]], [1.0])
                    continue
                rows = [ids[i] for i in r]
                needed = None if mask is None else [mask[i] for i in r]
                values = unpad(self._forward(module, rows, [temps[i] for i in r], needed), [len(x) for x in rows])
                out.update(zip(r, values))
        return out

    def model_scope(self, name: str):
        if name == 'policy':
            return contextlib.nullcontext(self.policy.module)
        if name == 'reference':
            return self.reference.module()
        raise ValueError(f"model must be 'policy' or 'reference', got {name!r}")

    def _plan(self, ids: List[List[int]], args: Dict[str, Any]) -> List[Optional[range]]:
        """This rank's micro-batches of the request, in order; None: a pass with no weight (see share_of_rank)."""
        parts = micro_batches([len(r) for r in ids], args.get('micro_batch_size'), args.get('micro_batch_tokens'))
        if self.world == 1:
            return list(parts)
        assert self.ranks is not None  # world > 1
        costs = [len(r) * max(len(ids[i]) for i in r) for r in parts]
        share = share_of_rank(costs, self.world, self.ranks.rank)
        real = [k for k in share if k is not None]
        log.info(
            'rank %d of %d: micro-batches %s of %d (%d of %d padded tokens)',
            self.ranks.rank,
            self.world,
            real,
            len(parts),
            sum(costs[k] for k in real),
            sum(costs),
        )
        return [None if k is None else parts[k] for k in share]

    def sft_step(self, args: Dict[str, Any]) -> Dict[str, Any]:
        ids = validate_ids(args['input_ids'])
        mask = validate_mask(args['mask'], ids)
        norm = Normalizers.of(pad(mask, torch.float32, torch.device('cpu')))
        totals = self._accumulate(
            ids, args, self._plan(ids, args), lambda r, lp, m: {'loss': sft_loss(lp, m, norm)}, mask
        )
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
        plan = self._plan(ids, args)
        ref_rows: Optional[Dict[int, List[float]]] = None
        if args.get('ref') is not None:
            ref_rows = dict(enumerate(args['ref']))
        elif settings.kl_coef != 0.0:
            # Before any policy forward: a LoRA reference swaps adapter weights that the backward still needs.
            ref_rows = self._no_grad_logprobs('reference', ids, temps, plan, mask)

        def loss_of(r: range, logp: torch.Tensor, m: torch.Tensor) -> Dict[str, torch.Tensor]:
            old = self._given(args['old'], r) if args.get('old') is not None else logp.detach()
            ref = self._given(ref_rows, r) if settings.kl_coef != 0.0 else None
            a = torch.tensor([adv[i] for i in r], dtype=torch.float32, device=self.device)
            return grpo_loss(logp, old, ref, m, a, settings, norm)

        totals = self._accumulate(ids, args, plan, loss_of, mask, temps)
        return {**totals, 'tokens': int(sum(map(sum, mask)))}

    def _given(self, rows, r: range) -> torch.Tensor:
        return pad([rows[i] for i in r], torch.float32, self.device)

    def _accumulate(
        self, ids, args, plan: List[Optional[range]], loss_of, mask, temps: Optional[List[float]] = None
    ) -> Dict[str, Any]:
        """One optimizer step over this rank's micro-batches; metrics are sums of whole-batch-normalised parts over all ranks."""
        if args.get('lr') is not None:
            self.updater.set_lr(float(args['lr']))
        self.policy.module.train()
        self.updater.zero_grad()
        totals: Dict[str, Any] = {}
        for k, r in enumerate(plan):
            self.updater.boundary(last=k == len(plan) - 1)
            if r is None:
                # A pass with no weight, so that this rank joins the others' collectives (share_of_rank).
                self.updater.backward(self._train_forward([ids[0][:2]], [1.0]).sum() * 0.0)
                continue
            logp = self._train_forward(
                [ids[i] for i in r], [temps[i] if temps else 1.0 for i in r], [mask[i] for i in r]
            )
            m = pad([mask[i] for i in r], torch.float32, self.device)
            out = loss_of(r, logp, m)
            # The ranks' gradients are averaged: scaled by their number, they add up to the whole batch's.
            self.updater.backward(out['loss'] * self.world)
            for name, v in out.items():
                totals[name] = totals.get(name, 0.0) + float(v.detach())
        if self.ranks is not None:
            totals = self.ranks.sum(totals)
        if not math.isfinite(totals['loss']):
            self.updater.zero_grad()
            raise FloatingPointError(f'non-finite loss {totals["loss"]}; step skipped')
        self.updater.reduce()
        gradients = self.updater.full_gradients() if args.get('gradients') else None
        totals['grad_norm'] = self.updater.step()
        self.step += 1
        totals['step'] = self.step
        if gradients is not None:
            totals['gradients'] = {n: g.to('cpu', torch.float64).reshape(-1).tolist() for n, g in gradients.items()}
        return totals

    def save(self, out_dir: Path) -> Dict[str, Any]:
        self.write_model(out_dir, merged=False)
        self.updater.save(out_dir, Saved(self.step, self.optimizer_tag))
        if is_main():
            self.reference.save(out_dir)
        return {
            'dir': str(out_dir),
            'step': self.step,
            'reference': self.reference.tag,
            'optimizer': self.optimizer_tag,
        }

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

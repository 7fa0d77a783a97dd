"""Writes grpo.json: GRPO/GSPO loss test vectors computed with plain-Python formulas (no torch).

Each value follows the written formula directly, sequence by sequence, so it checks the
engine's tensor code independently. Run with --check to verify
the committed file is what this script produces.

Per token t of sequence i (mask m, advantage A_i, r = exp(logp - old)):
  pg = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)); dual clip c, A < 0: pg = min(pg, -c A)
  GSPO: r is the same for every token of i: exp(sum_t m (logp - old) / sum_t m)
  KL (d = logp - ref): k1 = d, k2 = d^2 / 2, k3 = exp(-d) + d - 1
Aggregations of per-token x:
  token-mean                sum_i sum_t m x / sum_i sum_t m
  seq-mean-token-mean       mean over sequences with tokens of (sum_t m x / sum_t m)
  seq-mean-token-sum-norm   sum_i sum_t m x / (B * L)      (Dr.GRPO, fixed length L; B counts only
                            sequences with a generated token)
loss = agg(pg) + kl_coef * agg(kl); kl metric = token-mean of the estimator;
clip_fraction = token-mean of [clipped branch strictly larger]; dual_clip_fraction likewise;
ratio_mean = token-mean of r.
"""

import json
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

# Four sequences, aligned with token ids; position 0 is a prompt token (mask 0). The last one has
# no generated token (an episode cut before the model spoke): it must change no aggregate.
BATCH = {
    'logp': [[0.0, -0.5, -1.2, -0.3, -2.0], [0.0, -0.7, -0.1, -1.5], [0.0, -0.9, -0.4], [0.0, -0.2, -0.8]],
    'old': [[0.0, -0.6, -1.0, -0.3, -1.6], [0.0, -0.4, -0.5, -1.5], [0.0, -1.3, -0.45], [0.0, -0.3, -0.6]],
    'ref': [[0.0, -0.55, -1.1, -0.5, -1.9], [0.0, -0.6, -0.2, -1.2], [0.0, -1.0, -0.3], [0.0, -0.25, -0.7]],
    'mask': [[0, 1, 1, 0, 1], [0, 0, 1, 1], [0, 1, 1], [0, 0, 0]],
    'advantages': [1.0, -1.5, 0.5, 0.8],
}

VARIANTS: List[Tuple[str, Dict[str, Any]]] = [
    ('token-mean', {}),
    ('seq-mean-token-mean', {'aggregation': 'seq-mean-token-mean'}),
    ('dr-grpo', {'aggregation': 'seq-mean-token-sum-norm', 'norm_length': 8}),
    ('dual-clip', {'dual_clip': 1.1}),
    ('asymmetric-clip', {'eps_low': 0.1, 'eps_high': 0.28}),
    ('gspo', {'ratio_level': 'sequence', 'aggregation': 'seq-mean-token-mean', 'eps_low': 0.05, 'eps_high': 0.08}),
    ('kl-k1', {'kl_coef': 0.1, 'kl_estimator': 'k1'}),
    ('kl-k2', {'kl_coef': 0.1, 'kl_estimator': 'k2'}),
    ('kl-k3', {'kl_coef': 0.1, 'kl_estimator': 'k3'}),
    ('kl-k3-seq-mean', {'kl_coef': 0.05, 'kl_estimator': 'k3', 'aggregation': 'seq-mean-token-mean'}),
    (
        'kl-k2-dr-grpo',
        {'kl_coef': 0.2, 'kl_estimator': 'k2', 'aggregation': 'seq-mean-token-sum-norm', 'norm_length': 6},
    ),
]

DEFAULTS = {
    'eps_low': 0.2,
    'eps_high': 0.2,
    'dual_clip': None,
    'kl_coef': 0.0,
    'kl_estimator': 'k3',
    'aggregation': 'token-mean',
    'ratio_level': 'token',
    'norm_length': None,
}


def kl_token(d, estimator):
    if estimator == 'k1':
        return d
    if estimator == 'k2':
        return d * d / 2
    return math.exp(-d) + d - 1


def aggregate(per_seq_values, mask, s):
    """per_seq_values[i][t]; only masked positions count."""
    if s['aggregation'] == 'token-mean':
        total = sum(v for vs, ms in zip(per_seq_values, mask) for v, m in zip(vs, ms) if m)
        return total / max(sum(sum(ms) for ms in mask), 1)
    if s['aggregation'] == 'seq-mean-token-mean':
        means = [sum(v for v, m in zip(vs, ms) if m) / sum(ms) for vs, ms in zip(per_seq_values, mask) if sum(ms)]
        return sum(means) / max(len(means), 1)
    total = sum(v for vs, ms in zip(per_seq_values, mask) for v, m in zip(vs, ms) if m)
    return total / (sum(1 for ms in mask if sum(ms)) * s['norm_length'])


def token_mean(per_seq_values, mask):
    return aggregate(per_seq_values, mask, {'aggregation': 'token-mean'})


def expected(batch, s):
    pg, clipped_flags, dual_flags, kl, ratios = [], [], [], [], []
    for lp, old, ref, ms, a in zip(batch['logp'], batch['old'], batch['ref'], batch['mask'], batch['advantages']):
        n = sum(ms)
        seq_ratio = math.exp(sum((x - o) for x, o, m in zip(lp, old, ms) if m) / max(n, 1))
        row_pg, row_clip, row_dual, row_kl, row_r = [], [], [], [], []
        for x, o, rf, _m in zip(lp, old, ref, ms):
            r = seq_ratio if s['ratio_level'] == 'sequence' else math.exp(x - o)
            row_r.append(r)
            unclipped = -a * r
            clipped = -a * min(max(r, 1 - s['eps_low']), 1 + s['eps_high'])
            loss = max(unclipped, clipped)
            row_clip.append(1.0 if clipped > unclipped else 0.0)
            dual = 0.0
            if s['dual_clip'] is not None and a < 0:
                bound = -a * s['dual_clip']
                dual = 1.0 if bound < loss else 0.0
                loss = min(loss, bound)
            row_dual.append(dual)
            row_pg.append(loss)
            row_kl.append(kl_token(x - rf, s['kl_estimator']))
        pg.append(row_pg)
        clipped_flags.append(row_clip)
        dual_flags.append(row_dual)
        kl.append(row_kl)
        ratios.append(row_r)
    mask = batch['mask']
    pg_loss = aggregate(pg, mask, s)
    kl_loss = s['kl_coef'] * aggregate(kl, mask, s) if s['kl_coef'] else 0.0
    return {
        'loss': pg_loss + kl_loss,
        'pg_loss': pg_loss,
        'kl_loss': kl_loss,
        'kl': token_mean(kl, mask) if s['kl_coef'] else 0.0,
        'clip_fraction': token_mean(clipped_flags, mask),
        'dual_clip_fraction': token_mean(dual_flags, mask),
        'ratio_mean': token_mean(ratios, mask),
    }


def build():
    cases = []
    for name, overrides in VARIANTS:
        settings = {**DEFAULTS, **overrides}
        batch = {k: v for k, v in BATCH.items() if k != 'ref' or settings['kl_coef']}
        cases.append({'name': name, 'settings': overrides, 'inputs': batch, 'expected': expected(BATCH, settings)})
    return {
        'description': 'GRPO/GSPO loss vectors; regenerate with .cache/venv/bin/python engine/test-vectors/make_grpo_vectors.py',
        'tolerance': 1e-6,
        'cases': cases,
    }


def main():
    out = Path(__file__).with_name('grpo.json')
    text = json.dumps(build(), indent=1) + '\n'
    if '--check' in sys.argv:
        if out.read_text() != text:
            sys.exit(f'{out} is stale: regenerate it with this script')
        return
    out.write_text(text)


if __name__ == '__main__':
    main()

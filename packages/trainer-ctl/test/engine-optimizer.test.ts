/**
 * The engine's AdamW runs torch's fused kernel where the weights are on one CPU or CUDA device
 * (optim.can_fuse; issue 29 experiment 30: AdamW's step 0.38-0.43x its time on the tiny model) and
 * torch's default (foreach) kernels elsewhere. The reference is torch's default AdamW on the same
 * weights and gradients: the fused update must be the same up to rounding, a new optimizer after
 * `reset` must stay fused, and a checkpoint saved before the change (the default kernels' state)
 * must resume into the fused one and go on as the default would.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ENGINE_DIR, ENGINE_PYTHON } from '../src/engine';

const dir = mkdtempSync(join(tmpdir(), 'engine-optimizer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function python(script: string): Record<string, unknown> {
  const out = execFileSync(ENGINE_PYTHON, ['-c', script], { env: { ...process.env, PYTHONPATH: ENGINE_DIR }, encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').at(-1) as string);
}

const SETUP = `
import json, torch
from pathlib import Path
from torch import nn
from thinkfl_engine.optim import OptimSettings, PlainUpdater, can_fuse
torch.manual_seed(0)
settings = OptimSettings(lr=5e-3, weight_decay=0.01)
def module():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 8))
def grads(m, k):
    g = torch.Generator().manual_seed(k)
    for p in m.parameters():
        p.grad = torch.randn(p.shape, generator=g)
def gap(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a.parameters(), b.parameters()))
`;

describe('engine optimizer', () => {
  it("takes the fused kernel for weights on the CPU, updates as torch's default AdamW does up to rounding, and stays fused after reset", () => {
    const out = python(`${SETUP}
ours, ref = module(), module()
up = PlainUpdater(ours, settings)
opt = torch.optim.AdamW(ref.parameters(), lr=5e-3, weight_decay=0.01)
for k in range(20):
    grads(ours, k); grads(ref, k)
    up.optimizer.step(); opt.step()
fused_before = up.optimizer.defaults['fused']
up.reset()
meta = nn.Linear(4, 4, device='meta')
print(json.dumps({'fused': fused_before, 'after_reset': up.optimizer.defaults['fused'], 'gap': gap(ours, ref),
                  'moved': gap(ours, module()), 'meta': can_fuse(list(meta.parameters())),
                  'default_kernels': opt.defaults['fused']}))
`);
    expect(out.fused).toBe(true);
    expect(out.after_reset).toBe(true);
    expect(out.default_kernels).toBeNull();
    // 20 steps at lr 5e-3 move the weights by ~0.1; the two kernels' rounding differs by ~1e-7.
    expect(out.moved as number).toBeGreaterThan(1e-2);
    expect(out.gap as number).toBeLessThan(1e-5);
    expect(out.meta).toBe(false);
  }, 120_000);

  it('resumes a checkpoint saved by the default kernels and goes on as they would', () => {
    const out = python(`${SETUP}
out_dir = Path(${JSON.stringify(dir)})
old, ref = module(), module()
old_opt = torch.optim.AdamW(old.parameters(), lr=5e-3, weight_decay=0.01)
ref_opt = torch.optim.AdamW(ref.parameters(), lr=5e-3, weight_decay=0.01)
for k in range(5):
    grads(old, k); grads(ref, k); old_opt.step(); ref_opt.step()
torch.save({'optimizer': old_opt.state_dict(), 'step': 5, 'tag': 'stage'}, out_dir / 'optimizer.pt')
ours = module()
ours.load_state_dict(old.state_dict())
up = PlainUpdater(ours, settings)
saved = up.load(out_dir)
for k in range(5, 15):
    grads(ours, k); grads(ref, k); up.optimizer.step(); ref_opt.step()
state = up.optimizer.state[next(ours.parameters())]
print(json.dumps({'fused': up.optimizer.defaults['fused'], 'step': saved.step, 'tag': saved.tag,
                  'adam_step': float(state['step']), 'gap': gap(ours, ref)}))
`);
    expect(out.fused).toBe(true);
    expect(out.step).toBe(5);
    expect(out.tag).toBe('stage');
    // The moments came with the checkpoint: Adam's bias correction counts on from 5.
    expect(out.adam_step).toBe(15);
    expect(out.gap as number).toBeLessThan(1e-5);
  }, 120_000);
});

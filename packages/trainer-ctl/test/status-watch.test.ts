/**
 * `status --watch` on a run directory written by the controller's own writers while the "run"
 * advances between refreshes: in a log each step and evaluation is written once as a plain
 * line; on a terminal the whole status is redrawn in place each round; both return when done.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { appendMetrics } from '../src/run-files/metrics-log';
import { initialState, writeState, type RunState } from '../src/run-files/state';
import { watchStatus } from '../src/controller/index';
import type { ProgressStream } from '../src/progress';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

const step = (s: number) => ({
  kind: 'grpo' as const,
  stage: 'priming',
  step: s,
  update: s,
  reward: { mean: s / 10, std: 0 },
  format_valid: 1,
  zero_variance_share: 0,
  tool_calls: 2,
  train: { loss: 0.5, kl: 0.01 },
});

/** A run with one step done; each sleep completes one more step, the third also its evaluation and the run. */
function advancingRun(): { runDir: string; sleep: () => Promise<void>; sleeps: () => number } {
  const runDir = mkdtempSync(join(tmpdir(), 'watch-'));
  dirs.push(runDir);
  const state: RunState = initialState('watch-run', '/models/tiny');
  appendMetrics(runDir, step(0));
  state.metrics_lines = 1;
  writeState(runDir, state);
  let n = 0;
  const sleep = async () => {
    n++;
    appendMetrics(runDir, step(n));
    state.metrics_lines++;
    if (n === 3) {
      writeFileSync(
        join(runDir, 'eval-priming.json'),
        JSON.stringify({
          name: 'priming',
          policy_version: 3,
          format_valid: 0.5,
          summary: { levels: ['service'], per_fault: { service: { n: 4, recall: {}, mrr: 0.25, found: 1 } } },
        }),
      );
      state.done = true;
    }
    writeState(runDir, state);
  };
  return { runDir, sleep, sleeps: () => n };
}

function sink(isTTY: boolean): ProgressStream & { chunks: string[] } {
  const s = { isTTY, chunks: [] as string[], write: (c: string) => (s.chunks.push(c), true) };
  return s;
}

describe('status --watch', () => {
  it('in a log, writes each step and evaluation once, then a closing line', async () => {
    const run = advancingRun();
    const stream = sink(false);
    await watchStatus(run.runDir, { intervalMs: 1, stream, sleep: run.sleep });
    expect(run.sleeps()).toBe(3);
    expect(stream.chunks.join('').split('\n').filter(Boolean)).toEqual([
      'priming step 0 (update 0): reward 0 format 1 zero-var 0 calls 2 loss 0.500 kl 0.010',
      'priming step 1 (update 1): reward 0.100 format 1 zero-var 0 calls 2 loss 0.500 kl 0.010',
      'priming step 2 (update 2): reward 0.200 format 1 zero-var 0 calls 2 loss 0.500 kl 0.010',
      'priming step 3 (update 3): reward 0.300 format 1 zero-var 0 calls 2 loss 0.500 kl 0.010',
      'eval priming: policy v3, format validity 0.500, per-fault MRR (service) 0.250',
      'run watch-run done: 0 updates',
    ]);
  });

  it('on a terminal, redraws the whole status in place every round', async () => {
    const run = advancingRun();
    const stream = sink(true);
    await watchStatus(run.runDir, { intervalMs: 1, stream, sleep: run.sleep });
    expect(stream.chunks).toHaveLength(4);
    for (const c of stream.chunks) expect(c.startsWith('\x1b[H\x1b[2Jrun watch-run')).toBe(true);
    expect(stream.chunks[0]).toContain('stage: priming');
    expect(stream.chunks[0]).not.toContain('priming step 1 ');
    expect(stream.chunks[3]).toContain('stage: done');
    expect(stream.chunks[3]).toContain('priming step 3 (update 3)');
    expect(stream.chunks[3]).toContain('eval priming: policy v3');
  });
});

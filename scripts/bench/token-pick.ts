/**
 * Benchmark: the onnx backend's token pick (TokenSampler.pick: the log-probability of the picked
 * token over the whole vocabulary, and a draw at temperature > 0) against the pick of an earlier
 * commit, by default 103363e's, which ran exp over the vocabulary twice when sampling (once for
 * log Z, once for the weights drawn from). The baseline is that commit's sampling.ts, read with
 * `git show` and loaded beside the current one. On the tiny model's vocabulary (2,124) and
 * Qwen2.5's (151,936), at temperature 0, 1, and 1 with top_p 0.9; both run in this process,
 * alternating, and must pick the same tokens with the same log-probabilities. Prints ms a pick and
 * the baseline's time over the current one's.
 *
 *   npx tsx scripts/bench/token-pick.ts [--baseline REF] [--picks N] [--rounds N]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Rng } from '@thinkfl/env';
import { TokenSampler } from '../../packages/rollout/src/backends/sampling';
import { resolveSampling } from '../../packages/rollout/src/backends/types';
import { REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** The commit whose sampling.ts is the baseline. */
    baseline: { type: 'string', default: '103363e' },
    picks: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '5' },
  },
});
const picks = Number(values.picks);
const rounds = Number(values.rounds);

// The baseline's file imports only types, which tsx erases, so it loads from anywhere.
const dir = mkdtempSync(join(tmpdir(), 'token-pick-'));
const file = join(dir, 'sampling.ts');
writeFileSync(
  file,
  execFileSync('git', ['show', `${values.baseline}:packages/rollout/src/backends/sampling.ts`], { cwd: REPO_ROOT, encoding: 'utf8' }),
);
const Baseline = ((await import(file)) as { TokenSampler: typeof TokenSampler }).TokenSampler;
rmSync(dir, { recursive: true, force: true });

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`token pick, ms a pick: median of ${rounds} rounds of ${picks} picks each, alternating; baseline ${values.baseline}`);
console.log('vocabulary  sampling          baseline  current  baseline / current');
for (const vocab of [2124, 151936]) {
  const gen = new Rng(3);
  const logits = Float32Array.from({ length: vocab }, () => gen.next() * 12);
  for (const [label, input] of [
    ['temperature 0', { temperature: 0 }],
    ['temperature 1', { temperature: 1 }],
    ['T 1, top_p 0.9', { temperature: 1, top_p: 0.9 }],
  ] as const) {
    const s = resolveSampling(input);
    const [current, baseline] = [new TokenSampler(), new Baseline()];
    const [rc, rb] = [new Rng(11), new Rng(11)];
    const times = { current: [] as number[], baseline: [] as number[] };
    for (let r = 0; r <= rounds; r++) {
      let t0 = performance.now();
      const mine = Array.from({ length: picks }, () => current.pick(logits, s, rc));
      const one = (performance.now() - t0) / picks;
      t0 = performance.now();
      const base = Array.from({ length: picks }, () => baseline.pick(logits, s, rb));
      const two = (performance.now() - t0) / picks;
      base.forEach((x, i) => {
        if (x.token !== mine[i].token || x.logprob !== mine[i].logprob)
          throw new Error(`vocabulary ${vocab}, ${label}: pick ${i} differs: ${JSON.stringify(x)} vs ${JSON.stringify(mine[i])}`);
      });
      if (r > 0) times.current.push(one), times.baseline.push(two);
    }
    const [c, b] = [median(times.current), median(times.baseline)];
    console.log(
      `${String(vocab).padStart(10)}  ${label.padEnd(16)}  ${b.toFixed(3).padStart(8)}  ${c.toFixed(3).padStart(7)}  ${(b / c).toFixed(2)}x`,
    );
  }
}
console.log('every pick: the same token and log-probability as the baseline');

/**
 * `npm run bench:peers` at its smallest size (--smallest: one repetition, group 2, 8 new tokens,
 * batch 1 and 2, 4 decode tokens, a few hundred tool calls), so that the bench cannot rot: each
 * comparison prints its table, the peers ran (TRL trained the same number of parameters on a
 * prompt of the same length, onnxruntime-genai and transformers.js decoded the same greedy
 * tokens as the project's backend, pandas found the same children as the trace store). The
 * first run builds .cache/venv-peers and .cache/peers-node (minutes); no timing is asserted.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ensurePeersNode, ensurePeersVenv, REPO_ROOT } from './env';

let unbuildable = '';
try {
  ensurePeersVenv();
  ensurePeersNode();
} catch (e) {
  // Only a registry out of reach skips the test, and it says so.
  unbuildable = `the peers' environments could not be built (PyPI or npm unreachable?): ${(e as Error).message.split('\n')[0]}`;
}

describe('npm run bench:peers --smallest', () => {
  it('prints the GRPO, decode and tool-loop tables with every peer run', { timeout: 30 * 60_000 }, (ctx) => {
    if (unbuildable) ctx.skip(unbuildable);
    const out = execFileSync('npx', ['tsx', 'scripts/bench/peers/index.ts', '--smallest'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(out).toMatch(/^machine: .+, \d+ cores, native bf16: /m);

    const grpo = /GRPO step, tiny: (\d+) parameters \((\d+) trained, full; TRL (\d+) trained\)/.exec(out);
    expect(grpo).not.toBeNull();
    expect(grpo![3]).toBe(grpo![2]);
    const stepRow = (name: string) => new RegExp(`^\\| ${name}\\s*\\| (\\d+\\.\\d+) .*\\| (\\d+) \\[`, 'm').exec(out);
    for (const name of ['trl \\(GRPOTrainer\\)', 'project']) {
      const row = stepRow(name);
      expect(row, name).not.toBeNull();
      expect(Number(row![1])).toBeGreaterThan(0);
      expect(Number(row![2]), `${name} generated tokens`).toBeGreaterThan(0);
    }

    expect(out).toMatch(/^Decode: .+ onnxruntime-genai 0\.18\.0, transformers\.js 4\.3\.1/m);
    for (const name of ['project', 'project, spin on', 'onnxruntime-genai', 'transformers\\.js']) {
      for (const batch of [1, 2]) expect(out).toMatch(new RegExp(`^\\| ${name}\\s*\\| ${batch}\\s*\\| 4 \\[4-4\\]`, 'm'));
    }
    expect(out).toContain('row 0 greedy tokens: the same for all');

    expect(out).toMatch(/^Tool loop: children of a span among the \d+ spans/m);
    for (const name of ['search_traces', 'pandas', 'scan']) expect(out).toMatch(new RegExp(`^\\| ${name}\\s*\\|`, 'm'));
    expect(out.match(/^load average /gm)?.length).toBe(3);
  });
});

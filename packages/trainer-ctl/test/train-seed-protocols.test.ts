/**
 * A short GRPO run of the tiny model (created by the run) on the `oracl` and `knowledgemind`
 * protocols, end to end through `trainer-ctl train`: rollout workers play the protocol with the
 * model, the stage reward grades the episodes with the protocol's graders, and the engine
 * updates the policy. SFT is off (the expert plays `rot`, not these protocols).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EpisodeRecord } from '@thinkfl/env';
import { readMetrics } from '../src/run-files/metrics-log';
import { readState } from '../src/run-files/state';
import { ensureNezhaDataset, NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';

const CLI = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
const TIMEOUT = 900_000;
let scratch: string;

beforeAll(async () => {
  await ensureNezhaDataset();
  scratch = mkdtempSync(join(tmpdir(), 'i12-seed-grpo-'));
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function config(name: string, episode: string, reward: string): string {
  const file = join(scratch, `${name}.yaml`);
  writeFileSync(
    file,
    `run: { name: ${name}, seed: 0 }
model:
  dir: ${join(scratch, 'model')}
  dtype: float32
  max_context_tokens: 4096
  create_tiny: { seed: 0, hidden_size: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate_size: 128 }
dataset: { path: ${NEZHA_DATASET}, max_cases_per_fault: 2, max_eval_cases: 2 }
episode: ${episode}
generation:
  backend: { kind: onnx, threads: 1 }
  sampling: { max_tokens: 24 }
grpo:
  group_size: 2
  cases_per_step: 1
  max_refill_groups: 0
  advantage: { skip_equal_groups: false }
  optimizer: { lr: 1.0e-3 }
graders:
  stage_rewards: { priming: ${reward} }
stages:
  priming: { sft: { enabled: false }, steps: 2 }
  exploration: { enabled: false }
  refinement: { enabled: false }
workers:
  rollout: { count: 1, concurrency: 2 }
checkpoints: { every_steps: 1 }
`,
  );
  return file;
}

function train(file: string, runDir: string): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CLI, 'train', file, '--run-dir', runDir], { cwd: REPO_ROOT });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr += b));
  return new Promise((done) => child.on('exit', (code) => done({ code, stderr })));
}

const episodes = (runDir: string) =>
  readFileSync(join(runDir, 'episodes.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { reward?: number; episode: EpisodeRecord });

describe("GRPO on the seed systems' protocols", () => {
  it(
    'oracl: one tool-free turn per episode, graded by the oracl preset',
    async () => {
      const runDir = join(scratch, 'oracl');
      // A small sketch keeps the prompt inside the tiny model's context.
      const r = await train(config('oracl', '{ protocol: oracl, oracl: { max_pods: 6, max_templates: 2 } }', 'oracl'), runDir);
      expect(r.code, r.stderr).toBe(0);
      expect(readState(runDir)).toMatchObject({ done: true, updates: 2 });
      const grpo = readMetrics(runDir).filter((m) => m.kind === 'grpo');
      expect(grpo).toHaveLength(2);
      for (const m of grpo) expect(Object.keys(m.graders as object)).toEqual(['oracl_result', 'oracl_tag_format', 'oracl_length']);
      const eps = episodes(runDir);
      expect(eps.length).toBeGreaterThan(0);
      for (const { reward, episode } of eps) {
        expect(episode.protocol).toBe('oracl');
        expect(episode.turns).toHaveLength(1);
        expect(episode.turns[0].offered).toEqual([]);
        expect(['answered', 'no_answer']).toContain(episode.stopReason);
        // An untrained model writes no <root>: result 0 - 0.5 (one miss), format -1 (no tag), length 0.
        // (Evaluation episodes carry no reward.)
        if (
          reward !== undefined &&
          episode.stopReason === 'no_answer' &&
          !/<(think|Fault|Counterfactual|root)>/.test(episode.messages.at(-1)!.content)
        ) {
          expect(reward).toBe(-1.5);
        }
      }
    },
    TIMEOUT,
  );

  it(
    'knowledgemind: scores through tools, then an answer, graded by recall and fault_type',
    async () => {
      const runDir = join(scratch, 'knowledgemind');
      const reward = '{ terms: [{ grader: recall, weight: 1 }, { grader: fault_type, weight: 1 }] }';
      const r = await train(config('knowledgemind', '{ protocol: knowledgemind, knowledgemind: { simulations: 1 } }', reward), runDir);
      expect(r.code, r.stderr).toBe(0);
      expect(readState(runDir)).toMatchObject({ done: true, updates: 2 });
      for (const m of readMetrics(runDir).filter((x) => x.kind === 'grpo'))
        expect(Object.keys(m.graders as object)).toEqual(['recall', 'fault_type']);
      const eps = episodes(runDir);
      expect(eps.length).toBeGreaterThan(0);
      for (const { episode } of eps) {
        expect(episode.protocol).toBe('knowledgemind');
        expect(episode.turns[0].offered).toEqual(['score_services']);
        expect(episode.turns.at(-1)!.offered).toEqual(['print_results']);
        // The environment answers the path's end when the model's answer is not valid.
        expect(['answered', 'forced_answer']).toContain(episode.stopReason);
      }
    },
    TIMEOUT,
  );
});

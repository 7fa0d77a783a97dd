/**
 * A short GRPO run of the tiny model (created by the run) on the `oracl` and `knowledgemind`
 * protocols, end to end through `trainer-ctl train`: rollout workers play the protocol with the
 * model, the stage reward grades the episodes with the protocol's graders, and the engine
 * updates the policy. SFT is off (the expert plays `rot`, not these protocols).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EpisodeRecord } from '@thinkfl/env';
import { readMetrics } from '../src/run-files/metrics-log';
import { readState } from '../src/run-files/state';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { runCli, tinyRunHead } from './train-fixtures';

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
    `${tinyRunHead(scratch, name, episode)}graders:
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

const train = (file: string, runDir: string) => runCli(['train', file, '--run-dir', runDir]);

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
        expect(['answered', 'no_answer']).toContain(episode.stop_reason);
        // An untrained model writes no <root>: result 0 - 0.5 (one miss), format -1 (no tag), length 0.
        // (Evaluation episodes carry no reward.)
        if (
          reward !== undefined &&
          episode.stop_reason === 'no_answer' &&
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
        expect(['answered', 'forced_answer']).toContain(episode.stop_reason);
      }
    },
    TIMEOUT,
  );
});

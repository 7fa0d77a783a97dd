/**
 * Branched groups learn on the real pipeline (issue 26, acceptance 4): a real Redis, the rollout
 * worker's own episode player (the tiny model on the onnx backend playing a real Nezha case with
 * the env's tools), the train worker with its Python engine, and the controller's GRPO step with
 * grpo.groups { kind: branch, at: answer }. The fixed start is the tiny model taught by a few SFT
 * steps one walk of the case and, at its answer turn, a uniform mix of four answers, one of them
 * the true service. The reward is the recall grader alone (Eq. 9), decided by the answer turn.
 * Three seeds each take a few GRPO steps from that start; every seed's final group mean reward
 * must exceed the highest initial group mean of all seeds. Each step is also checked for what
 * makes the group branched: every sample replays its anchor's walk token for token, and only
 * the answer turn it generated after the branch point is trained.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode, type Case, type ChatMessage, type Dataset } from '@thinkfl/env';
import { loadChatModel, tokenizeEpisode, type ChatModel } from '@thinkfl/rollout';
import type { RunConfig } from '../src/config/index';
import { TrainEngine } from '../src/engine/index';
import { groupIdOf, RedisTransport, runGrpoStep } from '../src/controller/index';
import { anchorGroupId } from '../src/algo/groups/index';
import { connectRedis, GroupStore, parseQueueSettings, PolicyRegistry } from '../src/queue/index';
import { createEpisodePlayer, startRolloutWorker, startTrainWorker } from '../src/workers/index';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { closeGround, expectGainBeyondSeedSpread, openGround, writeRunConfig, type WorkerGround } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';
import { camelCaseKeys } from '../../../testkit/camel-keys';

const G = 16;
const STEPS = 4;
const SEEDS = [0, 1, 2];
const settings = parseQueueSettings({ pollMs: 50 });

let ground: WorkerGround;
let dataset: Dataset;
let config: RunConfig;
let kase: Case;

/** The expert's walk of the case with only the calls kept (no free text), answered with `pod`. */
function conversation(walk: ChatMessage[], pod: string): ChatMessage[] {
  const call = (m: ChatMessage) => ({ ...m, content: m.content.slice(m.content.indexOf('<tool_call>')) });
  const last = walk.map((m) => m.role).lastIndexOf('assistant');
  const answer = `<tool_call>\n${JSON.stringify({ name: 'print_results', arguments: { root_causes: [{ pod }] } })}\n</tool_call>`;
  return [...walk.slice(0, last).map((m) => (m.role === 'assistant' ? call(m) : m)), { role: 'assistant', content: answer }];
}

beforeAll(async () => {
  dataset = await loadDataset(await ensureNezhaDataset());
  ground = await openGround('branch');
  const model = await createTinyModel(join(ground.dir, 'model'), 5);
  const chat: ChatModel = loadChatModel(model);
  kase = dataset.cases[0];
  const episode = { d_max: 2, tool_settings: { span_aliases: true } };
  const walk = await runEpisode({
    dataset,
    case: kase,
    policy: createExpert(dataset, ExpertSettingsSchema.parse({ max_answers: 1 })),
    settings: episode,
  });
  // Four answers, one of them the truth (a pod-level fault), each a pod name: one token of the tiny tokenizer, so
  // the choice the reward decides is one sampled token.
  const truth = kase.truth.pod!;
  const others = dataset.topology.pods.map((p) => p.pod).filter((p) => p !== truth);
  const answers = [truth, ...others.slice(0, 3)];
  const rows = answers.map((s) => tokenizeEpisode(conversation(walk.messages, s), chat.template, chat.tokenizer, { tools: [] }));
  const start = join(ground.dir, 'start');
  const engine = new TrainEngine();
  try {
    await engine.request('load', { model_dir: model, seed: 0, optimizer: { lr: 1e-2 } });
    for (let k = 0; k < 40; k++) await engine.request('sft_step', { input_ids: rows.map((r) => r.ids), mask: rows.map((r) => r.mask) });
    await engine.request('export', { dir: start, format: 'onnx' });
  } finally {
    await engine.shutdown();
  }
  config = structuredClone(writeRunConfig(ground.dir, 'branch', start).config);
  config.episode.d_max = 2;
  config.generation.render_tools = false;
  config.grpo.group_size = G;
  config.grpo.cases_per_step = 1;
  config.grpo.max_refill_groups = 0;
  config.grpo.groups = { kind: 'branch', at: 'answer' };
  config.grpo.advantage.skip_equal_groups = false;
  config.grpo.optimizer.lr = 3e-3;
  config.generation.temperature.priming = 1;
  config.graders.stage_rewards.priming = { terms: [{ grader: 'recall', weight: 1 }] };
}, 600_000);

afterAll(() => closeGround(ground));

/** Group mean rewards of steps 0..STEPS for one seed (step k samples after k updates). */
async function run(seed: number): Promise<number[]> {
  const runId = `branch-${seed}`;
  const seeded: RunConfig = { ...config, run: { ...config.run, name: runId, seed } };
  const conn = connectRedis(ground.redis.url);
  const rollConn = connectRedis(ground.redis.url);
  const trainer = await startTrainWorker({
    connection: conn,
    runId,
    workerId: `train-${seed}`,
    settings,
    config: seeded,
    runDir: join(ground.dir, runId),
  });
  const player = await createEpisodePlayer({ config: seeded, registry: new PolicyRegistry(rollConn, runId), dataset });
  const roller = await startRolloutWorker({
    connection: rollConn,
    runId,
    workerId: `roll-${seed}`,
    settings,
    concurrency: 1,
    play: player.play,
  });
  const transport = new RedisTransport(ground.redis.url, runId, settings);
  const store = new GroupStore(transport.redis, runId);
  const means: number[] = [];
  let version = 0;
  try {
    for (let step = 0; step <= STEPS; step++) {
      const out = await runGrpoStep(
        { config: seeded, dataset, runId, train: [kase], transport },
        { stage: 'priming', step, update: version, policyVersion: version, checkpoint: false },
      );
      means.push(out.record.reward.mean);
      const [anchor] = await store.read(anchorGroupId(groupIdOf('priming', step, 0)));
      // The samples branch at the anchor's answer turn, its last (turn 1 while it walks as taught).
      const turn = anchor.turns!.length - 1;
      const branch = anchor.turns![turn][0];
      expect(out.record.branch_turn).toBe(turn);
      expect(camelCaseKeys(out.record, 'metrics line')).toEqual([]);
      if (step === 0) expect(turn).toBe(1);
      expect(out.groupIds).toEqual([groupIdOf('priming', step, 0), anchorGroupId(groupIdOf('priming', step, 0))]);
      for (const t of out.groups[0].trajectories) {
        expect(t.ids.slice(0, branch)).toEqual(anchor.ids.slice(0, branch));
        expect(t.turns![turn][0]).toBe(branch);
        expect(t.mask.slice(0, branch).every((m) => m === 0)).toBe(true);
        expect(t.mask.slice(branch).some((m) => m === 1)).toBe(true);
      }
      if (out.result) version = out.result.version;
      await transport.dropGroups(out.groupIds);
    }
  } finally {
    await roller.close();
    await player.close();
    await trainer.close();
    await store.close();
    await transport.close();
    rollConn.disconnect();
    conn.disconnect();
  }
  return means;
}

describe('branched GRPO groups on the real pipeline', () => {
  it('raise the group mean of an answer-turn reward beyond the spread over 3 seeds, training only the answer turn', async () => {
    await expectGainBeyondSeedSpread(run, SEEDS, STEPS);
  }, 120_000);
});

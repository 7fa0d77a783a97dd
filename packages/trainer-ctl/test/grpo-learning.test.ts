/**
 * GRPO learns on the real pipeline (issue 8 acceptance 5): a real Redis, a rollout worker that
 * samples from the published ONNX policy, the train worker with its Python engine, and the
 * queues and advantages of a run. The fixed start is a tiny model taught by a few SFT steps to
 * answer with a uniform mix of four token ids; the reward is simple and learnable: the share of
 * generated tokens equal to the first of them (~1/4 at the start, so groups' rewards differ).
 * Three sampling seeds each take a few GRPO steps from that start; every seed's final group
 * mean reward must exceed the highest initial group mean of all seeds, i.e. the gain is beyond
 * the spread between seeds.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpert, ExpertSettingsSchema, loadDataset, Rng, runEpisode, type EpisodeRecord } from '@thinkfl/env';
import { loadTokenizer, openOnnxBackend, type OnnxBackend } from '@thinkfl/rollout';
import type { RunConfig } from '../src/config/index';
import { TrainEngine } from '../src/engine/index';
import { RedisTransport } from '../src/controller/index';
import { computeAdvantages } from '../src/algo/core/advantages';
import { connectRedis, parseQueueSettings, PolicyRegistry, type RolloutJob, type TrainSample } from '../src/queue/index';
import { startRolloutWorker, startTrainWorker, type RolloutPlayer } from '../src/workers/index';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { closeGround, expectGainBeyondSeedSpread, openGround, writeRunConfig, type WorkerGround } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const G = 8;
const STEPS = 4;
const SEEDS = [0, 1, 2];
const TOKENS = 12;
const settings = parseQueueSettings({ pollMs: 50 });

let ground: WorkerGround;
let config: RunConfig;
let prompt: number[];
let episode: EpisodeRecord;
let target: number;

/** The learnable reward: share of generated tokens equal to the target id. */
const reward = (ids: number[], mask: number[]) => {
  const gen = ids.filter((_, t) => mask[t] === 1);
  return gen.length ? gen.filter((id) => id === target).length / gen.length : 0;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

beforeAll(async () => {
  const dataset = await loadDataset(await ensureNezhaDataset());
  ground = await openGround('learn');
  const model = await createTinyModel(join(ground.dir, 'model'), 5);
  const tok = loadTokenizer(model);
  prompt = tok.encode('search_traces(');
  // Ids of ordinary text (no end-of-sequence id among them).
  const choices = [...new Set(tok.encode('ts-order-service returned 500'))].slice(0, 4);
  expect(choices).toHaveLength(4);
  target = choices[0];
  // The fixed start: SFT on answers drawn uniformly from the four choices, exported as a model dir.
  const rng = new Rng(12345);
  const pick = () => choices[Math.floor(rng.next() * 4)];
  const start = join(ground.dir, 'start');
  const engine = new TrainEngine();
  try {
    await engine.request('load', { model_dir: model, seed: 0, optimizer: { lr: 1e-2 } });
    for (let k = 0; k < 30; k++) {
      const ids = Array.from({ length: 4 }, () => [...prompt, ...Array.from({ length: TOKENS }, pick)]);
      await engine.request('sft_step', { input_ids: ids, mask: ids.map((row) => row.map((_, t) => (t >= prompt.length ? 1 : 0))) });
    }
    await engine.request('export', { dir: start, format: 'onnx' });
  } finally {
    await engine.shutdown();
  }
  config = structuredClone(writeRunConfig(ground.dir, 'learn', start).config);
  config.grpo.group_size = G;
  config.grpo.optimizer.lr = 1e-2;
  // The trajectory record carries an episode; this token-level reward does not read it.
  episode = await runEpisode({
    dataset,
    case: dataset.cases[0],
    policy: createExpert(dataset, ExpertSettingsSchema.parse({})),
    settings: {},
  });
}, 300_000);
afterAll(() => closeGround(ground));

/** Group mean rewards of steps 0..STEPS (the last one sampled after STEPS updates) for one sampling seed. */
async function run(seed: number): Promise<number[]> {
  const runId = `learn-${seed}`;
  const conn = connectRedis(ground.redis.url);
  const registry = new PolicyRegistry(conn, runId);
  let backend: OnnxBackend | undefined;
  let version = -1;
  const play: RolloutPlayer = async (job: RolloutJob) => {
    const ref = await registry.waitFor(job.policy_version, 60_000);
    if (ref.version !== version) {
      await backend?.close();
      backend = await openOnnxBackend({ model_dir: ref.dir });
      version = ref.version;
    }
    const [g] = await backend!.generate([
      { promptIds: prompt, sampling: { temperature: job.temperature, max_tokens: TOKENS, seed: job.seed } },
    ]);
    return {
      group_id: job.group_id,
      case_id: job.case_id,
      sample_index: job.sample_index,
      policy_version: ref.version,
      ids: [...prompt, ...g.tokenIds],
      mask: [...prompt.map(() => 0), ...g.tokenIds.map(() => 1)],
      logprobs: [...prompt.map(() => 0), ...g.logprobs],
      temperature: job.temperature,
      episode,
      timing: { generate_ms: 0, tools_ms: 0, wall_ms: 0 },
    };
  };
  const trainer = await startTrainWorker({
    connection: conn,
    runId,
    workerId: `train-${seed}`,
    settings,
    config,
    runDir: join(ground.dir, runId),
  });
  const rollConn = connectRedis(ground.redis.url);
  const roller = await startRolloutWorker({ connection: rollConn, runId, workerId: `roll-${seed}`, settings, concurrency: 1, play });
  const transport = new RedisTransport(ground.redis.url, runId, settings);
  const means: number[] = [];
  try {
    for (let step = 0; step <= STEPS; step++) {
      const groupId = `${runId}-step${step}`;
      const jobs: RolloutJob[] = Array.from({ length: G }, (_, i) => ({
        run_id: runId,
        stage: 'priming',
        step,
        group_id: groupId,
        case_id: episode.case_id,
        sample_index: i,
        policy_version: step,
        temperature: 1,
        seed: seed * 1000 + step * G + i,
      }));
      await transport.enqueueRollouts(jobs);
      const group = await transport.waitGroup(groupId, G, 60_000);
      const rewards = group.map((t) => reward(t.ids, t.mask));
      means.push(mean(rewards));
      if (step === STEPS) break;
      const advantages = computeAdvantages(rewards, config.grpo.advantage);
      const samples: TrainSample[] = group.map((t, i) => ({
        ids: t.ids,
        mask: t.mask,
        advantage: advantages[i],
        old_logprobs: t.logprobs,
        temperature: t.temperature,
      }));
      await transport.train({ run_id: runId, stage: 'priming', update: step, kind: 'grpo', samples, checkpoint: false }, 120_000);
    }
  } finally {
    await roller.close();
    await trainer.close();
    await backend?.close();
    await transport.close();
    transport.redis.disconnect();
    rollConn.disconnect();
    conn.disconnect();
  }
  return means;
}

describe('GRPO on the real pipeline', () => {
  it('raises the group mean of a learnable reward beyond the spread over 3 seeds', async () => {
    await expectGainBeyondSeedSpread(run, SEEDS, STEPS);
  }, 120_000);
});

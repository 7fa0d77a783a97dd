/**
 * Benchmark: round-trip jobs per second through the project's rollout path (RolloutQueue ->
 * rollout worker -> GroupStore -> waitComplete/read) against a bare BullMQ Queue + Worker +
 * QueueEvents carrying the same payload (a real expert trajectory on Nezha as the result),
 * on the same redis-server, in the same run. Prints both rates (median of rounds) and the ratio.
 *
 *   npx tsx scripts/bench/queue-roundtrip.ts [--groups N] [--group-size G] [--concurrency C] [--rounds R]
 */
import { parseArgs } from 'node:util';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode } from '@thinkfl/env';
import {
  connectRedis,
  GroupStore,
  keys,
  parseQueueSettings,
  RolloutQueue,
  type RolloutJob,
  type Trajectory,
} from '../../packages/trainer-ctl/src/queue/index';
import { startRolloutWorker } from '../../packages/trainer-ctl/src/workers/rollout-worker';
import { ensureNezhaDataset } from '../../testkit/nezha';
import { startRedis } from '../../testkit/redis';

const { values } = parseArgs({
  options: {
    groups: { type: 'string', default: '100' },
    'group-size': { type: 'string', default: '8' },
    concurrency: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '5' },
  },
});
const GROUPS = Number(values.groups);
const G = Number(values['group-size']);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

const dataset = await loadDataset(await ensureNezhaDataset());
const kase = dataset.cases[0];
const episode = await runEpisode({ dataset, case: kase, policy: createExpert(dataset, ExpertSettingsSchema.parse({})), settings: {} });
const payload: Omit<Trajectory, 'group_id' | 'sample_index' | 'worker_id'> = {
  case_id: kase.id,
  policy_version: 0,
  ids: [],
  mask: [],
  logprobs: [],
  temperature: 1,
  episode,
  timing: { generate_ms: 0, tools_ms: 0, wall_ms: 0 },
};
const jobsOf = (run: string, groupId: string): RolloutJob[] =>
  [...Array(G).keys()].map((sampleIndex) => ({
    run_id: run,
    stage: 'priming',
    step: 0,
    group_id: groupId,
    case_id: kase.id,
    sample_index: sampleIndex,
    policy_version: 0,
    temperature: 1,
    seed: sampleIndex,
  }));

const redis = await startRedis();
const conn = connectRedis(redis.url);
const settings = parseQueueSettings({});

/** The project's path: groups go out one after another; each comes back through the group store. */
async function projectRound(run: string): Promise<number> {
  const queue = new RolloutQueue(conn, run, settings);
  const store = new GroupStore(conn, run);
  const worker = await startRolloutWorker({
    connection: conn,
    runId: run,
    workerId: 'bench',
    settings,
    concurrency: CONCURRENCY,
    jobTimeoutMs: 60_000,
    play: async (j) => ({ ...payload, group_id: j.group_id, sample_index: j.sample_index }),
  });
  const t = performance.now();
  for (let g = 0; g < GROUPS; g++) {
    await queue.enqueueGroup(jobsOf(run, `g${g}`));
    const got = await store.waitComplete(`g${g}`, G, 60_000);
    if (got.length !== G) throw new Error(`group g${g}: ${got.length} samples`);
  }
  const s = (performance.now() - t) / 1000;
  await Promise.all([worker.close(), queue.close(), store.close()]);
  return (GROUPS * G) / s;
}

/** Bare BullMQ: the same jobs, the payload returned as the job's result, awaited through QueueEvents. */
async function bareRound(run: string): Promise<number> {
  const name = keys.rolloutQueue(run);
  const queue = new Queue<RolloutJob>(name, { connection: conn, prefix: settings.prefix });
  const eventsConn = conn.duplicate();
  const events = new QueueEvents(name, { connection: eventsConn, prefix: settings.prefix });
  const worker = new Worker<RolloutJob>(name, async (j) => ({ ...payload, group_id: j.data.group_id, sample_index: j.data.sample_index }), {
    connection: conn,
    prefix: settings.prefix,
    concurrency: CONCURRENCY,
  });
  await Promise.all([events.waitUntilReady(), worker.waitUntilReady()]);
  const t = performance.now();
  for (let g = 0; g < GROUPS; g++) {
    const jobs = await queue.addBulk(
      jobsOf(run, `g${g}`).map((data) => ({ name: 'rollout', data, opts: { jobId: `g${g}#${data.sample_index}` } })),
    );
    const got = await Promise.all(jobs.map((j) => j.waitUntilFinished(events, 60_000)));
    if (got.length !== G) throw new Error(`group g${g}: ${got.length} results`);
  }
  const s = (performance.now() - t) / 1000;
  await Promise.all([worker.close(), events.close(), queue.close()]);
  eventsConn.disconnect();
  return (GROUPS * G) / s;
}

const project: number[] = [];
const bare: number[] = [];
await projectRound('warmup-project');
await bareRound('warmup-bare');
for (let r = 0; r < ROUNDS; r++) {
  bare.push(await bareRound(`bare-${r}`));
  project.push(await projectRound(`project-${r}`));
}
conn.disconnect();
await redis.stop();

console.log(
  `payload: one trajectory of ${JSON.stringify(payload).length} JSON characters; ${GROUPS} groups of ${G}, worker concurrency ${CONCURRENCY}`,
);
console.log(
  `bare BullMQ (Queue + Worker + QueueEvents): ${median(bare).toFixed(0)} jobs/s (median of ${ROUNDS}: ${bare.map((x) => x.toFixed(0)).join(', ')})`,
);
console.log(
  `project (RolloutQueue + worker + GroupStore): ${median(project).toFixed(0)} jobs/s (median of ${ROUNDS}: ${project.map((x) => x.toFixed(0)).join(', ')})`,
);
console.log(`ratio project / bare: ${(median(project) / median(bare)).toFixed(2)}`);

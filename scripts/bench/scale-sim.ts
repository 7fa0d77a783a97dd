/**
 * Simulation of the control plane at cluster scale: the real controller step (runGrpoStep over
 * RedisTransport: rollout queue, group store, real graders and GRPO advantages, the train job
 * with its step file), a real redis-server (the embedded one, append-only file on), N rollout
 * workers (the real BullMQ rollout worker, startRolloutWorker) in child processes whose
 * generation is a latency model, and a train worker process that takes the real train job,
 * checks its step file and sleeps for a modeled update time.
 *
 * Latency model of one vLLM replica serving a 3B model, per sequence:
 *   decode  127.61 tokens/s  Qwen2.5-3B-Instruct, BF16, vLLM 0.6.3, one A100 80GB, batch 1,
 *                            input length 1, 2,048 tokens generated;
 *   prefill 10,570 tokens/s  from the same table: input 6,144 gives 123.15 tokens/s, so the
 *                            6,144-token prefill costs at most 2048/123.15 - 2048/127.61 = 0.58 s.
 *   Source: Qwen2.5 Speed Benchmark, https://qwen.readthedocs.io/en/v2.5/benchmark/speed_benchmark.html
 *   (QwenLM/Qwen2.5 docs/source/benchmark/speed_benchmark.rst, "3B (vLLM)").
 * Batch-1 rates per sequence at `--concurrency` sequences per replica make generation shorter
 * than a loaded replica's, so the modeled step is short and the control plane's share high:
 * the share printed errs on the high side.
 *
 * Turn structure: the scripted expert's real episodes on the Nezha cases (rot protocol, D_max
 * 10), two per case (the expert, and a hastier expert with 2 tool turns and one answer, so a
 * group's rewards differ). Each assistant message is decoded, each system/user/tool message
 * prefilled (prefix caching: only new tokens), with token counts in proportion to the
 * messages' characters, scaled to `--tokens` per episode; tool time is the episode's own.
 * Workers sleep the modeled time x `--time-scale` and return well-formed token ids (Qwen2.5's
 * vocabulary), a mask of the decoded tokens and their log-probabilities.
 *
 * The modeled update lasts `--update-s` for a step of 4,096 x 4,096 tokens (a 64-GPU update,
 * an assumption, not a measurement), in proportion to the step's tokens otherwise.
 *
 * Per (episodes per step, workers) it prints: controller CPU time per step, bytes through Redis
 * per step (network in + out of redis-server), Redis CPU time per step, Redis peak memory, queue latency (enqueue to
 * start, p50/p99; it includes waiting for a free slot) and dispatch latency (start after the
 * later of enqueue and the replica's previous finish, p50/p99), the gap from the last complete
 * group to the update's start, and the control plane's share of the modeled step:
 *   (first episode's start + gap + result return) / (modeled generation + modeled update + those).
 * Enqueueing counts until the first episode starts: the other jobs are added while the first
 * wave plays (a wave is seconds long, the enqueue of 4,096 jobs well under that).
 * With --steps N (N > 2) it also prints Redis memory and the append-only file after each step.
 * Rows of at most --baseline-max episodes are run again as the baseline, in the same run: the
 * data path before step files (every token as JSON in Redis: trajectories in the group hashes,
 * samples in the train job), with the ratios.
 *
 *   npx tsx scripts/bench/scale-sim.ts [--episodes 64,512,4096] [--workers 1,8,64] [--steps 2]
 *     [--group-size 8] [--tokens 4096] [--concurrency 16] [--procs 4] [--time-scale 0.01]
 *     [--update-s 150] [--cases 64] [--baseline-max 512]
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { setPriority, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Job, Queue, Worker } from 'bullmq';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode, type Case, type Dataset, type EpisodeRecord } from '@thinkfl/env';
import { loadRunConfig, type RunConfig } from '../../packages/trainer-ctl/src/config/index';
import {
  RedisTransport,
  runCases,
  runGrpoStep,
  type ControlTransport,
  type StepContext,
} from '../../packages/trainer-ctl/src/controller/index';
import {
  connectRedis,
  keys,
  parseQueueSettings,
  pruneStepFiles,
  trainJobId,
  verifyFile,
  type RolloutJob,
  type TrainJob,
  type TrainResult,
  type Trajectory,
} from '../../packages/trainer-ctl/src/queue/index';
import { startEmbeddedRedis } from '../../packages/trainer-ctl/src/redis/embedded';
import { startRolloutWorker, type RolloutWorker } from '../../packages/trainer-ctl/src/workers/rollout-worker';
import { dataDir } from '../../packages/trainer-ctl/src/workers/run-files';
import { ensureNezhaDataset } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    role: { type: 'string', default: 'controller' },
    episodes: { type: 'string', default: '64,512,4096' },
    workers: { type: 'string', default: '1,8,64' },
    steps: { type: 'string', default: '2' },
    'group-size': { type: 'string', default: '8' },
    tokens: { type: 'string', default: '4096' },
    concurrency: { type: 'string', default: '16' },
    procs: { type: 'string', default: '4' },
    'time-scale': { type: 'string', default: '0.01' },
    'update-s': { type: 'string', default: '150' },
    'baseline-max': { type: 'string', default: '512' },
    inline: { type: 'boolean', default: false },
    cases: { type: 'string', default: '64' },
    // Child-process roles.
    redis: { type: 'string' },
    run: { type: 'string' },
    'run-dir': { type: 'string' },
    replicas: { type: 'string' },
    'first-replica': { type: 'string' },
  },
});

/** Published rates (see the header), tokens per second per sequence. */
const DECODE_TPS = 127.61;
const PREFILL_TPS = 6144 / (2048 / 123.15 - 2048 / 127.61);
/** Qwen2.5's vocabulary: the ids a 3B Qwen policy emits. */
const VOCAB = 151_643;
const TOKENS = Number(values.tokens);
const TIME_SCALE = Number(values['time-scale']);
const CONCURRENCY = Number(values.concurrency);
const G = Number(values['group-size']);
const UPDATE_S = Number(values['update-s']);
const STAGE = 'priming';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};

/** Per assistant turn: tokens prefilled before it (new context) and tokens it decodes. */
interface TurnShape {
  prefill: number;
  decode: number;
}

function turnShape(ep: EpisodeRecord, total: number): TurnShape[] {
  const chars = (m: EpisodeRecord['messages'][number]) => m.content.length + JSON.stringify(m.tool_calls ?? []).length;
  const turns: { prefill: number; decode: number }[] = [];
  let pending = 0;
  for (const m of ep.messages) {
    if (m.role === 'assistant') {
      turns.push({ prefill: pending, decode: chars(m) });
      pending = 0;
    } else pending += chars(m);
  }
  const sum = turns.reduce((a, t) => a + t.prefill + t.decode, 0);
  return turns.map((t) => ({
    prefill: Math.max(1, Math.round((t.prefill * total) / sum)),
    decode: Math.max(1, Math.round((t.decode * total) / sum)),
  }));
}

const modeledMs = (shape: TurnShape[], toolsMs: number) =>
  shape.reduce((a, t) => a + (t.prefill / PREFILL_TPS + t.decode / DECODE_TPS) * 1000, 0) + toolsMs;

/** Deterministic tokens of a modeled episode: prefilled tokens masked out, decoded ones in. */
function tokensOf(shape: TurnShape[], seed: number): Pick<Trajectory, 'ids' | 'mask' | 'logprobs'> {
  let x = seed >>> 0 || 1;
  const rnd = () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const ids: number[] = [];
  const mask: number[] = [];
  const logprobs: number[] = [];
  for (const t of shape) {
    for (let k = 0; k < t.prefill; k++) ids.push(Math.floor(rnd() * VOCAB)), mask.push(0), logprobs.push(0);
    for (let k = 0; k < t.decode; k++) ids.push(Math.floor(rnd() * VOCAB)), mask.push(1), logprobs.push(-rnd() * 3);
  }
  return { ids, mask, logprobs };
}

interface EpisodeFile {
  [caseId: string]: EpisodeRecord[];
}

// ---------------------------------------------------------------- rollout worker process
async function rolloutRole(): Promise<void> {
  const runDir = values['run-dir']!;
  const episodes = JSON.parse(readFileSync(join(runDir, 'episodes.json'), 'utf8')) as EpisodeFile;
  const shapes = new Map<EpisodeRecord, TurnShape[]>();
  const settings = parseQueueSettings({ lockDurationMs: 120_000, stalledIntervalMs: 120_000 });
  const first = Number(values['first-replica']);
  const workers: RolloutWorker[] = [];
  for (let r = 0; r < Number(values.replicas); r++) {
    const connection = connectRedis(values.redis!);
    const workerId = `replica-${first + r}`;
    const play = async (j: RolloutJob) => {
      const ep = episodes[j.case_id][j.sample_index % 2];
      let shape = shapes.get(ep);
      if (!shape) shapes.set(ep, (shape = turnShape(ep, TOKENS)));
      const ms = modeledMs(shape, ep.timing.wall_ms);
      await sleep(ms * TIME_SCALE);
      return {
        group_id: j.group_id,
        case_id: j.case_id,
        sample_index: j.sample_index,
        policy_version: j.policy_version,
        temperature: 1,
        ...tokensOf(shape, j.seed),
        episode: ep,
        timing: { generate_ms: ms, tools_ms: ep.timing.wall_ms, wall_ms: ms },
      };
    };
    const files = values.inline ? undefined : { dataDir: dataDir(runDir) };
    workers.push(
      await startRolloutWorker({
        connection,
        runId: values.run!,
        workerId,
        settings,
        concurrency: CONCURRENCY,
        jobTimeoutMs: 600_000,
        play,
        files,
      }),
    );
  }
  process.send?.('ready');
  process.on('SIGTERM', () => void Promise.all(workers.map((w) => w.close())).then(() => process.exit(0)));
}

// ---------------------------------------------------------------- train worker process
async function trainRole(): Promise<void> {
  const runDir = values['run-dir']!;
  const connection = connectRedis(values.redis!);
  const settings = parseQueueSettings({});
  const worker = new Worker<TrainJob, TrainResult>(
    keys.trainQueue(values.run!),
    async (j) => {
      const t = performance.now();
      // The engine's first act: check the step file whole against the job's reference.
      if (j.data.batch) verifyFile(j.data.batch);
      const verifyMs = performance.now() - t;
      const tokens = j.data.batch?.tokens ?? j.data.samples.reduce((a, x) => a + x.ids.length, 0);
      const updateMs = ((UPDATE_S * 1000 * tokens) / (4096 * 4096)) * TIME_SCALE;
      await sleep(updateMs);
      // Modeled checkpoint after every update: the step files it holds are no longer needed.
      pruneStepFiles(dataDir(runDir), j.data.update + 1);
      return { update: j.data.update, version: j.data.update + 1, policy_dir: '', metrics: { verifyMs } };
    },
    { connection, prefix: settings.prefix, concurrency: 1 },
  );
  await worker.waitUntilReady();
  process.send?.('ready');
  process.on('SIGTERM', () => void worker.close().then(() => process.exit(0)));
}

// ---------------------------------------------------------------- controller
interface Row {
  episodes: number;
  workers: number;
  cpuMs: number;
  redisBytes: number;
  redisCpuMs: number;
  peakMb: number;
  queueP50: number;
  queueP99: number;
  dispatchP50: number;
  dispatchP99: number;
  gapMs: number;
  controlMs: number;
  modeledMs: number;
  perStep: { usedMb: number; aofMb: number }[];
  baseline?: Row;
}

function redisInfo(text: string, key: string): number {
  const m = new RegExp(`^${key}:([\\d.]+)`, 'm').exec(text);
  if (!m) throw new Error(`INFO has no ${key}`);
  return Number(m[1]);
}

function dirBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true }))
    n += e.isDirectory() ? dirBytes(join(dir, e.name)) : statSync(join(dir, e.name)).size;
  return n;
}

function spawnRole(role: string, args: string[]): Promise<ChildProcess> {
  const child = fork(resolve(import.meta.filename), ['--role', role, ...args, ...passThrough()], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: ['--import', 'tsx'],
  });
  // The simulated workers stand in for other machines: niced, so that their CPU use on this
  // machine disturbs the controller's timings as little as it can.
  setPriority(child.pid!, 10);
  return new Promise((ok, fail) => {
    child.once('message', () => ok(child));
    child.once('exit', (code) => fail(new Error(`${role} process exited with ${code} before it was ready`)));
  });
}

function passThrough(): string[] {
  return ['tokens', 'time-scale', 'concurrency', 'update-s'].flatMap((k) => [`--${k}`, String(values[k as keyof typeof values])]);
}

/** Makespan of the episodes' modeled durations on workers x concurrency slots, in job order. */
function modeledGeneration(durations: number[], slots: number): number {
  const free = new Array<number>(slots).fill(0);
  for (const d of durations) {
    let i = 0;
    for (let k = 1; k < slots; k++) if (free[k] < free[i]) i = k;
    free[i] += d;
  }
  return Math.max(...free);
}

interface World {
  config: RunConfig;
  dataset: Dataset;
  train: Case[];
  episodeFile: EpisodeFile;
}

/** One row of the table; `inline` runs the baseline: every token as JSON in Redis (no data directory). */
async function simulate(world: World, episodes: number, nWorkers: number, steps: number, inline = false): Promise<Row> {
  const { config, train, episodeFile } = world;
  const runDir = mkdtempSync(join(tmpdir(), 'scale-sim-'));
  const runId = `sim-${episodes}-${nWorkers}`;
  writeFileSync(join(runDir, 'episodes.json'), JSON.stringify(episodeFile));
  const redis = await startEmbeddedRedis({ runDir });
  const info = connectRedis(redis.url);
  const procs: ChildProcess[] = [];
  const transport = new RedisTransport(redis.url, runId, { prefix: config.queue.prefix }, undefined, inline ? undefined : dataDir(runDir));
  // Read-only views of the two queues for BullMQ's job timestamps.
  const rolloutJobs = new Queue<RolloutJob>(keys.rolloutQueue(runId), { connection: info, prefix: config.queue.prefix });
  const trainJobs = new Queue<TrainJob, TrainResult>(keys.trainQueue(runId), { connection: info, prefix: config.queue.prefix });
  const row: Row = {
    episodes,
    workers: nWorkers,
    cpuMs: 0,
    redisBytes: 0,
    redisCpuMs: 0,
    peakMb: 0,
    queueP50: 0,
    queueP99: 0,
    dispatchP50: 0,
    dispatchP99: 0,
    gapMs: 0,
    controlMs: 0,
    modeledMs: 0,
    perStep: [],
  };
  try {
    const common = ['--redis', redis.url, '--run', runId, '--run-dir', runDir, ...(inline ? ['--inline'] : [])];
    const nProcs = Math.min(nWorkers, Number(values.procs));
    for (let p = 0; p < nProcs; p++) {
      const first = Math.floor((p * nWorkers) / nProcs);
      const next = Math.floor(((p + 1) * nWorkers) / nProcs);
      procs.push(await spawnRole('rollout', [...common, '--replicas', String(next - first), '--first-replica', String(first)]));
    }
    procs.push(await spawnRole('train', common));
    const cfg = structuredClone(config);
    cfg.grpo.group_size = G;
    cfg.grpo.cases_per_step = episodes / G;
    const arrivals: number[] = [];
    let trainCalledAt = 0;
    // The real transport; only the time each group completes is noted on the way.
    const timed: ControlTransport = {
      enqueueRollouts: (jobs) => transport.enqueueRollouts(jobs),
      waitGroup: (id, size, ms) => transport.waitGroup(id, size, ms).then((t) => (arrivals.push(Date.now()), t)),
      stageTrainRows: (update, samples, maxGroups) => transport.stageTrainRows(update, samples, maxGroups),
      train: (job, ms) => ((trainCalledAt = Date.now()), transport.train(job, ms)),
      dropGroups: (ids) => transport.dropGroups(ids),
      workers: () => transport.workers(),
      close: () => transport.close(),
    };
    const ctx: StepContext = { config: cfg, dataset: world.dataset, runId, train, transport: timed };
    const rows: Omit<Row, 'episodes' | 'workers' | 'peakMb' | 'perStep'>[] = [];
    for (let step = 0; step < steps; step++) {
      arrivals.length = 0;
      const before = await info.info('stats');
      const cpuBefore = await info.info('cpu');
      const cpu = process.cpuUsage();
      const t0 = Date.now();
      const out = await runGrpoStep(ctx, { stage: STAGE, step, update: step, policyVersion: step, checkpoint: false });
      const tEnd = Date.now();
      const used = process.cpuUsage(cpu);
      const after = await info.info('stats');
      const cpuAfter = await info.info('cpu');
      const redisCpu = (t: string) => redisInfo(t, 'used_cpu_sys') + redisInfo(t, 'used_cpu_user');
      if (!out.result) throw new Error(`step ${step}: no update (every group had equal rewards)`);
      // Queue timings from BullMQ's own job records, before the groups are dropped.
      const jobs = (await rolloutJobs.getJobs(['completed'])).filter((j) => j.data.step === step);
      const byReplica = new Map<string, { start: number; end: number; enq: number }[]>();
      const worker = new Map(
        out.groups.flatMap((g) => g.trajectories.map((t): [string, string] => [`${t.group_id}#${t.sample_index}`, t.worker_id])),
      );
      for (const j of jobs) {
        const w = worker.get(j.id!) ?? '?';
        if (!byReplica.has(w)) byReplica.set(w, []);
        byReplica.get(w)!.push({ start: j.processedOn!, end: j.finishedOn!, enq: j.timestamp });
      }
      const queueLat: number[] = [];
      const dispatch: number[] = [];
      for (const list of byReplica.values()) {
        for (const j of list) {
          queueLat.push(j.start - j.enq);
          const prev = list.filter((k) => k.end <= j.start).reduce((a, k) => Math.max(a, k.end), 0);
          dispatch.push(j.start - Math.max(j.enq, prev));
        }
      }
      const trainJob = await Job.fromId<TrainJob, TrainResult>(trainJobs, trainJobId(runId, step));
      const lastGroup = Math.max(...arrivals);
      const gapMs = trainJob!.processedOn! - lastGroup;
      const resultMs = tEnd - trainJob!.finishedOn!;
      const durations = out.groups.flatMap((g) => g.trajectories.map((t) => t.timing.generate_ms));
      const modeledUpdate = (UPDATE_S * 1000 * out.record.samples * TOKENS) / (4096 * 4096);
      // Episodes start while later jobs are still being added: enqueueing delays the step by the
      // wait for the first job to start, not by the whole enqueue (which overlaps the first wave).
      const firstStartMs = Math.min(...jobs.map((j) => j.processedOn!)) - t0;
      const controlMs = firstStartMs + gapMs + resultMs;
      rows.push({
        cpuMs: (used.user + used.system) / 1000,
        redisBytes:
          redisInfo(after, 'total_net_input_bytes') +
          redisInfo(after, 'total_net_output_bytes') -
          redisInfo(before, 'total_net_input_bytes') -
          redisInfo(before, 'total_net_output_bytes'),
        redisCpuMs: (redisCpu(cpuAfter) - redisCpu(cpuBefore)) * 1000,
        queueP50: pct(queueLat, 50),
        queueP99: pct(queueLat, 99),
        dispatchP50: pct(dispatch, 50),
        dispatchP99: pct(dispatch, 99),
        gapMs,
        controlMs,
        modeledMs: modeledGeneration(durations, nWorkers * CONCURRENCY) + modeledUpdate + controlMs,
      });
      await transport.dropGroups(out.groups.map((g) => g.groupId));
      const mem = await info.info('memory');
      row.perStep.push({ usedMb: redisInfo(mem, 'used_memory') / 2 ** 20, aofMb: dirBytes(join(redis.dir, 'appendonlydir')) / 2 ** 20 });
      process.stderr.write(
        `  step ${step}: ${((tEnd - t0) / 1000).toFixed(1)} s wall, controller CPU ${(rows.at(-1)!.cpuMs / 1000).toFixed(2)} s, first episode after ${firstStartMs} ms (enqueue ${out.record.timing.enqueue_ms} ms), ` +
          `grading ${out.record.timing.grade_ms} ms, gap ${gapMs} ms (advantages and samples ${trainCalledAt - lastGroup} ms, step file ${trainJob!.timestamp - trainCalledAt} ms, train job waited ${trainJob!.processedOn! - trainJob!.timestamp} ms), result ${resultMs} ms, ` +
          `Redis ${row.perStep.at(-1)!.usedMb.toFixed(1)} MB, AOF ${row.perStep.at(-1)!.aofMb.toFixed(2)} MB\n`,
      );
    }
    // Steps after the first (the first also warms up code paths and connections); all steps when there is one.
    const later = rows.length > 1 ? rows.slice(1) : rows;
    const med = (f: (r: (typeof rows)[number]) => number) => pct(later.map(f), 50);
    Object.assign(row, {
      cpuMs: med((r) => r.cpuMs),
      redisBytes: med((r) => r.redisBytes),
      redisCpuMs: med((r) => r.redisCpuMs),
      queueP50: med((r) => r.queueP50),
      queueP99: med((r) => r.queueP99),
      dispatchP50: med((r) => r.dispatchP50),
      dispatchP99: med((r) => r.dispatchP99),
      gapMs: med((r) => r.gapMs),
      controlMs: med((r) => r.controlMs),
      modeledMs: med((r) => r.modeledMs),
    });
    row.peakMb = redisInfo(await info.info('memory'), 'used_memory_peak') / 2 ** 20;
  } finally {
    for (const p of procs) p.kill('SIGTERM');
    await Promise.all(procs.map((p) => (p.exitCode === null ? new Promise((r) => p.once('exit', r)) : undefined)));
    await Promise.all([transport.close(), rolloutJobs.close(), trainJobs.close()]);
    info.disconnect();
    await redis.stop();
    rmSync(runDir, { recursive: true, force: true });
  }
  return row;
}

async function controllerRole(): Promise<void> {
  const { config } = loadRunConfig(resolve('configs/qwen2.5-3b.yaml'), { checkPaths: false });
  const dataset = await loadDataset(await ensureNezhaDataset());
  config.grpo.max_refill_groups = 0;
  // Every episode reaches the train job: the largest step file and the heaviest train job.
  config.grpo.advantage.skip_equal_groups = false;
  const train = runCases(dataset, config).train.slice(0, Number(values.cases));
  const hasty = createExpert(dataset, ExpertSettingsSchema.parse({ confirmations: 0, max_answers: 1 }));
  const expert = createExpert(dataset, ExpertSettingsSchema.parse({}));
  const episodeFile: EpisodeFile = {};
  for (const c of train) {
    const { protocol, ...settings } = config.episode;
    const play = (policy: typeof expert, dMax = settings.d_max) =>
      runEpisode({ dataset, case: c, policy, protocol, settings: { ...settings, d_max: dMax } });
    // The hasty expert answers after one tool turn: it plays an episode of D_max 2.
    episodeFile[c.id] = [await play(expert), await play(hasty, 2)];
  }
  const shapes = Object.values(episodeFile)
    .flat()
    .map((e) => turnShape(e, TOKENS));
  const gen = shapes.map((s) => modeledMs(s, 0));
  process.stderr.write(
    `${train.length} cases, ${shapes.length} expert episodes: ${pct(
      shapes.map((s) => s.length),
      50,
    )} assistant turns (median), ` + `modeled generation ${(pct(gen, 50) / 1000).toFixed(1)} s (median) at ${TOKENS} tokens\n`,
  );

  const steps = Number(values.steps);
  const table: Row[] = [];
  for (const episodes of values.episodes!.split(',').map(Number)) {
    for (const w of values.workers!.split(',').map(Number)) {
      if (episodes % G !== 0) throw new Error(`--episodes ${episodes}: not a multiple of the group size ${G}`);
      process.stderr.write(`${episodes} episodes per step, ${w} rollout workers:\n`);
      const world = { config, dataset, train, episodeFile };
      const row = await simulate(world, episodes, w, steps);
      if (episodes <= Number(values['baseline-max'])) {
        process.stderr.write(`  baseline, every token as JSON in Redis:\n`);
        row.baseline = await simulate(world, episodes, w, steps, true);
      }
      table.push(row);
    }
  }

  const f = (x: number, d = 0) => x.toFixed(d);
  console.log(
    `\nscale-sim: ${TOKENS} tokens per episode, groups of ${G}, ${CONCURRENCY} sequences per worker, time scale ${TIME_SCALE}, ` +
      `modeled update ${UPDATE_S} s per 4096 x 4096 tokens, ${steps} steps per row (median of the steps after the first)`,
  );
  console.log(
    '| episodes/step | workers | controller CPU/step (s) | CPU per episode (ms) | bytes through Redis/step (MB) | Redis CPU/step (s) | Redis peak (MB) | queue p50/p99 (ms) | dispatch p50/p99 (ms) | last group -> update start (ms) | control plane (s) | modeled step (s) | control-plane share |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of table) {
    console.log(
      `| ${r.episodes} | ${r.workers} | ${f(r.cpuMs / 1000, 2)} | ${f(r.cpuMs / r.episodes, 2)} | ${f(r.redisBytes / 2 ** 20, 1)} | ${f(r.redisCpuMs / 1000, 2)} | ${f(r.peakMb, 1)} | ${f(r.queueP50)}/${f(r.queueP99)} | ` +
        `${f(r.dispatchP50)}/${f(r.dispatchP99)} | ${f(r.gapMs)} | ${f(r.controlMs / 1000, 2)} | ${f(r.modeledMs / 1000, 1)} | ${f((100 * r.controlMs) / r.modeledMs, 2)}% |`,
    );
  }
  const based = table.filter((r) => r.baseline);
  if (based.length) {
    console.log(
      '\nbaseline in the same run, every token as JSON in Redis (the data path before step files); ratio = step files / baseline',
    );
    console.log(
      '| episodes/step | workers | bytes through Redis/step (MB) | ratio | Redis peak (MB) | ratio | controller CPU/step (s) | ratio | last group -> update start (ms) | ratio |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const r of based) {
      const b = r.baseline!;
      const ratio = (x: number, y: number) => f(x / y, 2);
      console.log(
        `| ${r.episodes} | ${r.workers} | ${f(b.redisBytes / 2 ** 20, 1)} | ${ratio(r.redisBytes, b.redisBytes)} | ${f(b.peakMb, 1)} | ${ratio(r.peakMb, b.peakMb)} | ` +
          `${f(b.cpuMs / 1000, 2)} | ${ratio(r.cpuMs, b.cpuMs)} | ${f(b.gapMs)} | ${ratio(r.gapMs, b.gapMs)} |`,
      );
    }
  }
  if (steps > 2) {
    for (const r of table) {
      const first = r.perStep[0];
      const last = r.perStep.at(-1)!;
      console.log(
        `${r.episodes} x ${r.workers}: Redis used memory after each step (MB) ${r.perStep.map((s) => f(s.usedMb, 1)).join(' ')}; ` +
          `append-only file (MB) ${r.perStep.map((s) => f(s.aofMb, 2)).join(' ')}; growth ${f((last.aofMb - first.aofMb) / (r.perStep.length - 1), 3)} MB/step`,
      );
    }
  }
}

if (values.role === 'rollout') await rolloutRole();
else if (values.role === 'train') await trainRole();
else await controllerRole();

/**
 * `trainer-ctl train`: prepares inputs, opens (or resumes) the run directory, brings up Redis
 * and the workers when no Redis URL is given, runs the stages, and takes down what it started.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadDataset } from '@thinkfl/env';
import { RedisDiversityCache } from '@thinkfl/graders';
import { loadRunConfig, type RunConfig } from '../config/index';
import type { ProgressStream } from '../progress';
import { redactSecrets, redactUrl, REDIS_PASSWORD_ENV, REDIS_URL_ENV, resolveRedisUrl, waitReady } from '../queue/index';
import { startEmbeddedRedis, type EmbeddedRedis } from '../redis/index';
import { runCases } from './cases';
import { truncateMetrics } from './metrics-log';
import { prepareInputs } from './prepare';
import { recordProcesses, startWorkerProcess, stopLeftovers, stopWorkerProcesses, type ProcessRecord, type WorkerProcess } from './processes';
import { RedisTransport } from './redis-transport';
import { runStages } from './run-stages';
import { initialState, readState, rewindTo, writeState, type RunState } from './state';
import { latestCheckpoint } from '../workers/run-files';
import { configTeacher } from './teacher';

export interface TrainOptions {
  configFile: string;
  /** Default <run.output_dir>/<run.name>. */
  runDir?: string;
  /** An existing Redis whose queues external workers serve; default THINKFL_REDIS_URL, then queue.redis_url, else embedded. */
  redisUrl?: string;
  /** Continue a run directory's run from its last completed step. */
  resume?: boolean;
  stream?: ProgressStream;
  print?: (text: string) => void;
}

/** Where `trainer-ctl status` finds the run's Redis and config. */
export const RUN_INFO_FILE = 'run.json';

function openState(config: RunConfig, runDir: string, resume: boolean | undefined): RunState {
  const state = readState(runDir);
  const policy = config.checkpoints.resume;
  if (!state) {
    if (resume || policy === 'require') throw new Error(`${runDir}: no state.json, nothing to resume`);
    return initialState(config.run.name, config.model.dir);
  }
  if (policy === 'never') throw new Error(`${runDir} already holds a run (state.json) and checkpoints.resume is never; choose another --run-dir`);
  if (state.runName !== config.run.name) throw new Error(`${runDir} holds run ${state.runName}, not ${config.run.name}`);
  // The train worker resumes from the latest checkpoint; steps after it are played again.
  const ckpt = latestCheckpoint(runDir);
  const from = rewindTo(runDir, state, ckpt?.updates, config.model.dir);
  truncateMetrics(runDir, from.metricsLines);
  return from;
}

async function redisPid(t: RedisTransport): Promise<number> {
  const info = await t.redis.info('server');
  return Number(/process_id:(\d+)/.exec(info)?.[1]);
}

export async function trainRun(opts: TrainOptions): Promise<RunState> {
  const print = opts.print ?? ((s: string) => process.stdout.write(`${s}\n`));
  const note = (s: string) => (opts.stream ?? process.stderr).write(`${s}\n`);
  await prepareInputs(loadRunConfig(opts.configFile, { checkPaths: false }).config, note);
  const loaded = loadRunConfig(opts.configFile);
  const config = loaded.config;
  const runDir = resolve(opts.runDir ?? loaded.runDir);
  mkdirSync(runDir, { recursive: true });
  const state = openState(config, runDir, opts.resume);
  if (state.done) {
    print(`run ${config.run.name} in ${runDir} is already complete (${state.updates} updates)`);
    return state;
  }
  writeState(runDir, state);
  writeFileSync(join(runDir, 'config.yaml'), redactSecrets(readFileSync(opts.configFile, 'utf8')));
  await stopLeftovers(runDir);

  const runId = config.run.name;
  const external = resolveRedisUrl(opts.redisUrl, config.queue.redis_url);
  let embedded: EmbeddedRedis | undefined;
  let transport: RedisTransport | undefined;
  const workers: WorkerProcess[] = [];
  const shutdown = async () => {
    await stopWorkerProcesses(workers);
    await transport?.close();
    await embedded?.stop();
    recordProcesses(runDir, []);
  };
  // Ctrl-C or a SIGTERM stops what this run started; the next start resumes from state.json.
  const onSignal = (sig: NodeJS.Signals) => {
    note(`${sig}: stopping the run's workers and Redis; resume with --resume`);
    void shutdown().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    if (!external) embedded = await startEmbeddedRedis({ runDir, executable: config.queue.redis_server, readyTimeoutS: config.queue.ready_timeout_s });
    const url = external ?? embedded!.url;
    writeFileSync(join(runDir, RUN_INFO_FILE), `${JSON.stringify({ runId, redisUrl: redactUrl(url), embedded: !external, configFile: resolve(opts.configFile), pid: process.pid }, null, 1)}\n`);
    transport = new RedisTransport(url, runId, { prefix: config.queue.prefix });
    // A refused password fails here in one clear line instead of hanging the first queue command.
    await waitReady(transport.redis);
    await transport.discardWaitingRollouts();
    const records: ProcessRecord[] = [];
    if (embedded) {
      records.push({ pid: await redisPid(transport), marker: 'redis-server', role: 'redis' });
      const common = ['--config', resolve(opts.configFile), '--run-dir', runDir];
      // The embedded Redis has no password: one the caller's REDIS_PASSWORD would add is wrong there.
      const env = { [REDIS_URL_ENV]: url, [REDIS_PASSWORD_ENV]: '' };
      workers.push(startWorkerProcess(runDir, 'train', 'train', common, env));
      for (let i = 0; i < config.workers.rollout.count; i++) workers.push(startWorkerProcess(runDir, `rollout-${i}`, 'rollout', common, env));
      records.push(...workers.map((w) => w.record));
    }
    recordProcesses(runDir, records);
    const diversity = new RedisDiversityCache(transport.redis, { keyPrefix: `thinkfl:${runId}:diversity:`, ttlSeconds: 0 });
    const dataset = await loadDataset(config.dataset.path);
    const split = runCases(dataset, config);
    note(`run ${runId}: ${split.train.length} training cases, ${split.eval.length} held-out cases; run dir ${runDir}`);
    await runStages(
      { config, runId, runDir, dataset, train: split.train, eval: split.eval, transport, diversity, teacher: configTeacher(config, dataset, split.train), stream: opts.stream, print },
      state,
    );
    print(`run ${runId} complete: ${state.updates} updates, policy v${state.policyVersion}${state.checkpoint ? `, checkpoint ${state.checkpoint}` : ''}`);
    return state;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    await shutdown();
  }
}

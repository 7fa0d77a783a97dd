/**
 * `trainer-ctl train`: opens (or resumes) the run directory, prepares inputs, brings up Redis
 * and the workers when no Redis URL is given, runs the stages, and takes down what it started,
 * also when it is stopped part way (a signal, a worker that died, a Redis that is gone).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadDataset } from '@thinkfl/env';
import { RedisDiversityCache } from '@thinkfl/graders';
import { loadRunConfig, type RunConfig } from '../config/index';
import { diskFix, diskProblem, fsDiskError } from '../disk-errors';
import type { ProgressStream } from '../progress';
import { RedisAuthError, redactSecrets, redactUrl, REDIS_PASSWORD_ENV, REDIS_URL_ENV, resolveRedisUrl, waitReady } from '../queue/index';
import { startEmbeddedRedis } from '../redis/embedded';
import { runCases } from './cases';
import { truncateMetrics } from '../run-files/metrics-log';
import { prepareInputs } from './prepare';
import { startWorkerProcess, stopLeftovers } from './processes';
import { RunTree } from './run-tree';
import { RedisTransport } from './redis-transport';
import { runStages } from './run-stages';
import { initialState, readState, rewindTo, writeJsonAtomically, writeState, type RunState } from '../run-files/state';
import { dataDir, latestCheckpoint } from '../workers/run-files';
import { configTeacher } from './teacher';
import { EventFileWriter, TENSORBOARD_DIR } from '../logs/tensorboard';
import { ExpectationsFailed, gateRun } from '../ci/gate';

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

function openState(config: RunConfig, runDir: string, resume: boolean | undefined, note: (line: string) => void): RunState {
  const state = readState(runDir);
  const policy = config.checkpoints.resume;
  if (!state) {
    if (resume || policy === 'require') throw new Error(`${runDir}: no state.json, nothing to resume`);
    return initialState(config.run.name, config.model.dir);
  }
  if (policy === 'never')
    throw new Error(`${runDir} already holds a run (state.json) and checkpoints.resume is never; choose another --run-dir`);
  if (state.run_name !== config.run.name) throw new Error(`${runDir} holds run ${state.run_name}, not ${config.run.name}`);
  // The train worker resumes from the latest checkpoint; steps after it are played again.
  const ckpt = latestCheckpoint(runDir, note);
  const from = rewindTo(runDir, state, ckpt?.updates, config.model.dir);
  truncateMetrics(runDir, from.metrics_lines);
  return from;
}

/**
 * A run that stopped before its end: by a signal, or because a part failed for good. The
 * message says how to continue; `exitCode` is what the process should exit with.
 */
export class RunStopped extends Error {
  override name = 'RunStopped';
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

const SIGNAL_EXIT: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

function resumeHint(opts: TrainOptions, runDir: string): string {
  return `continue it with: trainer-ctl train ${opts.configFile} --run-dir ${runDir} --resume`;
}

/**
 * Runs (or resumes) a run. A SIGINT or SIGTERM at any point, a worker that exits, or a Redis
 * that cannot be brought back stops everything the run started (RunTree) and rejects with
 * RunStopped naming the command that continues the run.
 */
export async function trainRun(opts: TrainOptions): Promise<RunState> {
  const note = (s: string) => (opts.stream ?? process.stderr).write(`${s}\n`);
  let fail!: (e: Error) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => undefined);
  let tree: RunTree | undefined;
  let runDir: string | undefined;
  const abort = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (abort.signal.aborted) return;
    note(`${sig}: stopping the run's workers, engine and Redis`);
    fail(new RunStopped(`stopped by ${sig}`, SIGNAL_EXIT[sig] ?? 1));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const work = runTree(opts, {
    note,
    signal: abort.signal,
    opened: (dir, t) => {
      runDir = dir;
      tree = t;
    },
    fail: (e) => fail(e),
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work, failed]);
  } catch (e) {
    abort.abort();
    await tree?.close();
    // A finished run that missed its expectations, or a refused password, is not a stopped run: resuming cannot help.
    if (!runDir || e instanceof ExpectationsFailed || e instanceof RedisAuthError) throw e;
    const why = e instanceof RunStopped ? e : new RunStopped(`run stopped: ${(fsDiskError(e, runDir) ?? (e as Error)).message}`, 1);
    // A full or read-only disk (the controller's own write, or a worker's reason) needs fixing first.
    const disk = diskProblem(why.message);
    throw new RunStopped(`${why.message}; ${disk ? `${diskFix(disk)}, then ` : ''}${resumeHint(opts, runDir)}`, why.exitCode);
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

interface RunHooks {
  note: (line: string) => void;
  /** Aborted once the run is stopping: nothing new is started. */
  signal: AbortSignal;
  /** The run directory is open and `tree` holds what the run starts. */
  opened: (runDir: string, tree: RunTree) => void;
  /** A part of the run failed on its own. */
  fail: (e: Error) => void;
}

/** The run's own redis-server (no Redis URL given), started again from its append-only file when it dies; its URL. */
async function startRunRedis(config: RunConfig, runDir: string, tree: RunTree, hooks: RunHooks): Promise<string> {
  const embedded = await startEmbeddedRedis({
    runDir,
    executable: config.queue.redis_server,
    readyTimeoutS: config.queue.ready_timeout_s,
    onEvent: (e) => {
      if (e.kind === 'died') hooks.note(`redis-server ${e.how}; starting it again from its append-only file`);
      else if (e.kind === 'restarted') {
        hooks.note(`redis-server is back (restart ${e.restarts})`);
        tree.record();
      } else hooks.fail(new Error(`the run's redis-server died and could not be started again: ${e.error.message}`));
    },
  });
  await tree.addRedis(embedded);
  return embedded.url;
}

/** The train worker and workers.rollout.count rollout workers as child processes on the run's own Redis, each logging to logs/<name>.log. */
async function startWorkers(
  configFile: string,
  config: RunConfig,
  runDir: string,
  url: string,
  tree: RunTree,
  signal: AbortSignal,
): Promise<void> {
  const common = ['--config', resolve(configFile), '--run-dir', runDir];
  // The URL reaches workers through their environment, never their command line; the embedded
  // Redis has no password, so one the caller's REDIS_PASSWORD would add is cleared.
  const env = { [REDIS_URL_ENV]: url, [REDIS_PASSWORD_ENV]: '' };
  const names = ['train', ...Array.from({ length: config.workers.rollout.count }, (_, i) => `rollout-${i}`)];
  for (const name of names) {
    if (signal.aborted) break;
    const w = startWorkerProcess(runDir, name, name === 'train' ? 'train' : 'rollout', common, env);
    await tree.addWorker(w, join(runDir, 'logs', `${name}.log`));
  }
}

async function runTree(opts: TrainOptions, hooks: RunHooks): Promise<RunState> {
  const print = opts.print ?? ((s: string) => process.stdout.write(`${s}\n`));
  const { note } = hooks;
  const early = loadRunConfig(opts.configFile, { checkPaths: false });
  const runDir = resolve(opts.runDir ?? early.runDir);
  mkdirSync(runDir, { recursive: true });
  // State first: a run stopped while its inputs are prepared is resumed like any other.
  const state = openState(early.config, runDir, opts.resume, note);
  if (state.done) {
    print(`run ${early.config.run.name} in ${runDir} is already complete (${state.updates} updates)`);
    gateRun(runDir, early.config, print);
    return state;
  }
  writeState(runDir, state);
  writeFileSync(join(runDir, 'config.yaml'), redactSecrets(readFileSync(opts.configFile, 'utf8')));
  await stopLeftovers(runDir);
  const tree = new RunTree(runDir, hooks.fail);
  hooks.opened(runDir, tree);
  await prepareInputs(early.config, note, hooks.signal);
  const config = loadRunConfig(opts.configFile).config;

  const runId = config.run.name;
  const external = resolveRedisUrl(opts.redisUrl, config.queue.redis_url);
  const url = external ?? (await startRunRedis(config, runDir, tree, hooks));
  writeJsonAtomically(join(runDir, RUN_INFO_FILE), {
    run_id: runId,
    redis_url: redactUrl(url),
    embedded: !external,
    config_file: resolve(opts.configFile),
    pid: process.pid,
  });
  const transport = new RedisTransport(url, runId, { prefix: config.queue.prefix }, note, dataDir(runDir));
  await tree.addTransport(transport);
  // A refused password fails here in one clear line instead of hanging the first queue command.
  await waitReady(transport.redis, hooks.signal);
  if (external) await transport.discardWaitingRollouts();
  else {
    await transport.resetForStart();
    await startWorkers(opts.configFile, config, runDir, url, tree, hooks.signal);
  }
  tree.record();
  const diversity = new RedisDiversityCache(transport.redis, { keyPrefix: `thinkfl:${runId}:diversity:`, ttlSeconds: 0 });
  const dataset = await loadDataset(config.dataset.path);
  const split = runCases(dataset, config);
  const scalars = new EventFileWriter(join(runDir, TENSORBOARD_DIR));
  // A resumed run replays the steps after state.json's count: TensorBoard drops what was logged for them.
  if (state.metrics_lines > 0) scalars.restart(state.metrics_lines + 1);
  note(`run ${runId}: ${split.train.length} training cases, ${split.eval.length} held-out cases; run dir ${runDir}`);
  await runStages(
    {
      config,
      runId,
      runDir,
      dataset,
      train: split.train,
      eval: split.eval,
      transport,
      diversity,
      teacher: configTeacher(config, dataset, split.train),
      stream: opts.stream,
      print,
      scalars,
    },
    state,
  );
  await tree.close();
  print(
    `run ${runId} complete: ${state.updates} updates, policy v${state.policy_version}${state.checkpoint ? `, checkpoint ${state.checkpoint}` : ''}`,
  );
  gateRun(runDir, config, print);
  return state;
}

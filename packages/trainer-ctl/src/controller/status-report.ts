/**
 * What `trainer-ctl status RUN_DIR` shows: the stage and step from state.json, the latest
 * metrics lines, the evaluations written so far, and the workers whose heartbeats are recent
 * (when the run's Redis is reachable).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { STAGE_NAMES } from '../config/index';
import { hasRedactedPassword, listWorkers, redactSecrets, redactUrl, REDIS_PASSWORD_ENV, REDIS_URL_ENV, resolveRedisUrl, type WorkerBeat } from '../queue/index';
import type { EvalReport } from './evaluation';
import { readMetrics, type MetricsRecord } from './metrics-log';
import { readState, type RunState } from './state';
import { RUN_INFO_FILE } from './train-run';

export interface RunStatus {
  runDir: string;
  state: RunState;
  /** The stage in progress (first not done), or 'done'. */
  stage: string;
  recent: MetricsRecord[];
  evals: Pick<EvalReport, 'name' | 'policyVersion' | 'formatValid' | 'summary'>[];
  /** The run's Redis, password redacted. */
  redisUrl?: string;
  /** Workers with their heartbeat age; undefined when Redis could not be reached. */
  workers?: (WorkerBeat & { ageS: number; alive: boolean })[];
  redisError?: string;
}

/** Evaluations in the order a run writes them. */
const EVAL_ORDER: string[] = ['sft', ...STAGE_NAMES];

/** A heartbeat older than this counts the worker as gone (workers beat every few seconds). */
const ALIVE_S = 30;

async function readBeats(url: string, runId: string): Promise<WorkerBeat[]> {
  const redis = new Redis(url, { connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await listWorkers(redis, runId);
  } finally {
    redis.disconnect();
  }
}

export async function runStatus(runDir: string, opts: { tail?: number; redisUrl?: string; now?: number } = {}): Promise<RunStatus> {
  const state = readState(runDir);
  if (!state) throw new Error(`${runDir}: no state.json (not a run directory, or the run has not started)`);
  const stage = state.done ? 'done' : (STAGE_NAMES.find((s) => !state.stages[s].done) ?? 'done');
  const recent = readMetrics(runDir).slice(0, state.metricsLines).slice(-(opts.tail ?? 5));
  const evals = readdirSync(runDir)
    .filter((f) => /^eval-.+\.json$/.test(f))
    .map((f) => JSON.parse(readFileSync(join(runDir, f), 'utf8')) as EvalReport)
    .map(({ name, policyVersion, formatValid, summary }) => ({ name, policyVersion, formatValid, summary }))
    .sort((a, b) => EVAL_ORDER.indexOf(a.name) - EVAL_ORDER.indexOf(b.name));
  const info = existsSync(join(runDir, RUN_INFO_FILE)) ? (JSON.parse(readFileSync(join(runDir, RUN_INFO_FILE), 'utf8')) as { redisUrl?: string }) : {};
  // run.json holds the URL redacted; the password comes from the environment, as for workers.
  const url = resolveRedisUrl(opts.redisUrl, info.redisUrl);
  const status: RunStatus = { runDir, state, stage, recent, evals, ...(url && { redisUrl: redactUrl(url) }) };
  if (url && hasRedactedPassword(url)) {
    status.redisError = `its password is not recorded; set ${REDIS_PASSWORD_ENV} or ${REDIS_URL_ENV}`;
  } else if (url) {
    const now = opts.now ?? Date.now();
    try {
      status.workers = (await readBeats(url, state.runName)).map((w) => {
        const ageS = (now - w.lastSeen) / 1000;
        return { ...w, ageS, alive: ageS <= ALIVE_S };
      });
    } catch (e) {
      status.redisError = redactSecrets((e as Error).message);
    }
  }
  return status;
}

const fmt = (x: unknown) => (typeof x === 'number' ? (Number.isInteger(x) ? String(x) : x.toFixed(3)) : String(x));

/** One evaluation as status shows it. */
export function evalLine(e: RunStatus['evals'][number]): string {
  const mrr = e.summary.perFault.service?.mrr ?? e.summary.perFault.pod?.mrr;
  return `eval ${e.name}: policy v${e.policyVersion}, format validity ${fmt(e.formatValid)}, per-fault MRR (service) ${fmt(mrr ?? '-')}`;
}

/** One metrics line as status shows it (indented). */
export function metricsLine(m: MetricsRecord): string {
  if (m.kind === 'sft') return `  sft update ${m.update}/${m.of}: loss ${fmt((m.train as Record<string, number>).loss)}`;
  if (m.kind === 'track') {
    return `  track after ${m.update} updates (${m.cases} training cases, greedy): format ${fmt(m.formatValid)} per-request MRR (service) ${fmt(m['perRequest/service/mrr'] ?? '-')}`;
  }
  const r = m as MetricsRecord & { reward: { mean: number }; formatValid: number; zeroVarianceShare: number; train: Record<string, number>; toolCalls: number };
  return (
    `  ${m.stage} step ${m.step} (update ${m.update ?? '-'}): reward ${fmt(r.reward.mean)} format ${fmt(r.formatValid)} ` +
    `zero-var ${fmt(r.zeroVarianceShare)} calls ${fmt(r.toolCalls)} loss ${fmt(r.train.loss ?? '-')} kl ${fmt(r.train.kl ?? '-')}`
  );
}

export function formatStatus(s: RunStatus): string {
  const st = s.state;
  const lines = [`run ${st.runName} (${s.runDir})`, `stage: ${s.stage}`];
  if (s.stage !== 'done') {
    const p = st.stages[s.stage as keyof RunState['stages']];
    lines.push(`step: ${p.steps} done in ${s.stage}${s.stage === 'priming' ? `, sft ${st.sft.done ? 'done' : `${st.sft.updates} updates`}` : ''}`);
  }
  lines.push(`updates: ${st.updates}, policy v${st.policyVersion}, checkpoint: ${st.checkpoint ?? 'none'}, state written ${st.updatedAt}`);
  for (const e of s.evals) lines.push(evalLine(e));
  lines.push(s.recent.length ? 'recent metrics:' : 'recent metrics: none yet', ...s.recent.map(metricsLine));
  if (!s.redisUrl) lines.push('workers: unknown (no Redis URL recorded)');
  else if (s.redisError) lines.push(`workers: Redis ${s.redisUrl} not reachable (${s.redisError})`);
  else {
    const alive = s.workers!.filter((w) => w.alive);
    lines.push(`workers alive: ${alive.length}`, ...s.workers!.map((w) => `  ${w.id} ${w.kind} pid ${w.pid ?? '?'} on ${w.host ?? '?'}: last seen ${w.ageS.toFixed(0)} s ago${w.alive ? '' : ' (gone)'}`));
  }
  return lines.join('\n');
}

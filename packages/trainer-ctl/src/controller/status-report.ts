/**
 * What `trainer-ctl status RUN_DIR` shows: the stage and step from state.json, the latest
 * metrics lines, the evaluations written so far, and the workers whose heartbeats are recent
 * (when the run's Redis is reachable).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { STAGE_NAMES } from '../config/index';
import {
  hasRedactedPassword,
  listWorkers,
  redactSecrets,
  redactUrl,
  REDIS_PASSWORD_ENV,
  REDIS_URL_ENV,
  resolveRedisUrl,
  type WorkerBeat,
} from '../queue/index';
import type { EvalReport } from './evaluation';
import { readMetrics, type MetricsRecord } from '../run-files/metrics-log';
import { readState, type RunState } from '../run-files/state';
import { RUN_INFO_FILE } from './train-run';

export interface RunStatus {
  run_dir: string;
  state: RunState;
  /** The stage in progress (first not done), or 'done'. */
  stage: string;
  recent: MetricsRecord[];
  evals: Pick<EvalReport, 'name' | 'policy_version' | 'format_valid' | 'summary'>[];
  /** The run's Redis, password redacted. */
  redis_url?: string;
  /** Workers with their heartbeat age; undefined when Redis could not be reached. */
  workers?: (WorkerBeat & { age_s: number; alive: boolean })[];
  redis_error?: string;
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
  const recent = readMetrics(runDir)
    .slice(0, state.metrics_lines)
    .slice(-(opts.tail ?? 5));
  const evals = readdirSync(runDir)
    .filter((f) => /^eval-.+\.json$/.test(f))
    .map((f) => JSON.parse(readFileSync(join(runDir, f), 'utf8')) as EvalReport)
    .map(({ name, policy_version, format_valid, summary }) => ({ name, policy_version, format_valid, summary }))
    .sort((a, b) => EVAL_ORDER.indexOf(a.name) - EVAL_ORDER.indexOf(b.name));
  const info = existsSync(join(runDir, RUN_INFO_FILE))
    ? (JSON.parse(readFileSync(join(runDir, RUN_INFO_FILE), 'utf8')) as { redis_url?: string })
    : {};
  // run.json holds the URL redacted; the password comes from the environment, as for workers.
  const url = resolveRedisUrl(opts.redisUrl, info.redis_url);
  const status: RunStatus = { run_dir: runDir, state, stage, recent, evals, ...(url && { redis_url: redactUrl(url) }) };
  if (url && hasRedactedPassword(url)) {
    status.redis_error = `its password is not recorded; set ${REDIS_PASSWORD_ENV} or ${REDIS_URL_ENV}`;
  } else if (url) {
    const now = opts.now ?? Date.now();
    try {
      status.workers = (await readBeats(url, state.run_name)).map((w) => {
        const age_s = (now - w.last_seen) / 1000;
        return { ...w, age_s, alive: age_s <= ALIVE_S };
      });
    } catch (e) {
      status.redis_error = redactSecrets((e as Error).message);
    }
  }
  return status;
}

const fmt = (x: unknown) => (typeof x === 'number' ? (Number.isInteger(x) ? String(x) : x.toFixed(3)) : String(x));

/** One evaluation as status shows it. */
export function evalLine(e: RunStatus['evals'][number]): string {
  const mrr = e.summary.per_fault.service?.mrr ?? e.summary.per_fault.pod?.mrr;
  return `eval ${e.name}: policy v${e.policy_version}, format validity ${fmt(e.format_valid)}, per-fault MRR (service) ${fmt(mrr ?? '-')}`;
}

/** One metrics line as status shows it (indented). */
export function metricsLine(m: MetricsRecord): string {
  if (m.kind === 'sft') return `  sft update ${m.update}/${m.of}: loss ${fmt((m.train as Record<string, number>).loss)}`;
  if (m.kind === 'track') {
    return `  track after ${m.update} updates (${m.cases} training cases, greedy): format ${fmt(m.format_valid)} per-request MRR (service) ${fmt(m['per_request/service/mrr'] ?? '-')}`;
  }
  const r = m as MetricsRecord & {
    reward: { mean: number };
    format_valid: number;
    zero_variance_share: number;
    train: Record<string, number>;
    tool_calls: number;
  };
  return (
    `  ${m.stage} step ${m.step} (update ${m.update ?? '-'}): reward ${fmt(r.reward.mean)} format ${fmt(r.format_valid)} ` +
    `zero-var ${fmt(r.zero_variance_share)} calls ${fmt(r.tool_calls)} loss ${fmt(r.train.loss ?? '-')} kl ${fmt(r.train.kl ?? '-')}`
  );
}

export function formatStatus(s: RunStatus): string {
  const st = s.state;
  const lines = [`run ${st.run_name} (${s.run_dir})`, `stage: ${s.stage}`];
  if (s.stage !== 'done') {
    const p = st.stages[s.stage as keyof RunState['stages']];
    lines.push(
      `step: ${p.steps} done in ${s.stage}${s.stage === 'priming' ? `, sft ${st.sft.done ? 'done' : `${st.sft.updates} updates`}` : ''}`,
    );
  }
  lines.push(
    `updates: ${st.updates}, policy v${st.policy_version}, checkpoint: ${st.checkpoint ?? 'none'}, state written ${st.updated_at}`,
  );
  for (const e of s.evals) lines.push(evalLine(e));
  lines.push(s.recent.length ? 'recent metrics:' : 'recent metrics: none yet', ...s.recent.map(metricsLine));
  if (!s.redis_url) lines.push('workers: unknown (no Redis URL recorded)');
  else if (s.redis_error) lines.push(`workers: Redis ${s.redis_url} not reachable (${s.redis_error})`);
  else {
    const alive = s.workers!.filter((w) => w.alive);
    lines.push(
      `workers alive: ${alive.length}`,
      ...s.workers!.map(
        (w) =>
          `  ${w.id} ${w.kind} pid ${w.pid ?? '?'} on ${w.host ?? '?'}: last seen ${w.age_s.toFixed(0)} s ago${w.alive ? '' : ' (gone)'}`,
      ),
    );
  }
  return lines.join('\n');
}

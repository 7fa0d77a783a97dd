/**
 * The Redis password never leaks (issue 15): a small `trainer-ctl train` run on a
 * password-protected Redis with external train and rollout workers, the password given once in
 * the environment (REDIS_PASSWORD, for a Redis ACL user named in the URL), once inside a URL
 * in THINKFL_REDIS_URL and once inside the config's queue.redis_url. The password string appears in no log line, no file under the run
 * directory, no output of `trainer-ctl status`, and no /proc/<pid>/cmdline of any process of
 * the run's tree (controller, workers, train engine); nor the train engine's environment, which
 * never needs it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readState } from '../src/run-files/state';
import { NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';
import { startRedisWithPasswords, type TestRedis } from '../../../testkit/redis';
import { scratch } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const CLI = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
const DEFAULT_PASSWORD = 'dflt-pw-c41e9b7d';
const ALICE_PASSWORD = 'alice-pw-93f0a2e6';
let redis: TestRedis;
let dir: string;
let modelDir: string;

beforeAll(async () => {
  redis = await startRedisWithPasswords(DEFAULT_PASSWORD, ALICE_PASSWORD);
  dir = scratch('secrets');
  modelDir = await createTinyModel(join(dir, 'model'), 3);
}, 300_000);
afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function writeConfig(name: string, redisUrl?: string): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `run: { name: ${name}, output_dir: ${join(dir, 'runs')}, seed: 0 }
model: { dir: ${modelDir}, dtype: float32, max_context_tokens: 4096 }
dataset: { path: ${NEZHA_DATASET}, max_cases_per_fault: 2, max_eval_cases: 1 }
episode: { protocol: rot, d_max: 3, tool_settings: { span_aliases: true } }
generation:
  backend: { kind: onnx, threads: 1 }
  sampling: { max_tokens: 16 }
grpo: { group_size: 2, cases_per_step: 1, max_refill_groups: 0, advantage: { skip_equal_groups: false }, optimizer: { lr: 1.0e-3 } }
stages:
  priming: { sft: { conversations: 2, epochs: 1, batch_size: 2, optimizer: { lr: 1.0e-3 } }, steps: 1 }
  exploration: { steps: 1, repeats: 1 }
  refinement: { steps: 1 }
workers: { rollout: { count: 0, concurrency: 2 } }
checkpoints: { every_steps: 1 }
${redisUrl ? `queue: { redis_url: '${redisUrl}' }\n` : ''}`,
  );
  return file;
}

interface Proc {
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
}

function start(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, env: { ...process.env, ...env } });
  const output: string[] = [];
  child.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
  child.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
  return { child, output, exited: new Promise((done) => child.on('exit', (code) => done(code))) };
}

/** Pids of `roots` and all their descendants, from /proc. */
function tree(roots: number[]): number[] {
  const parent = new Map<number, number>();
  for (const e of readdirSync('/proc').filter((f) => /^\d+$/.test(f))) {
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      parent.set(Number(e), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out = new Set(roots);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, ppid] of parent) if (out.has(ppid) && !out.has(pid)) out.add(pid), (grew = true);
  }
  return [...out];
}

function cmdlines(pids: number[]): string[] {
  return pids.flatMap((p) => {
    try {
      return [readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' ')];
    } catch {
      return [];
    }
  });
}

/** The environments of the train engine's processes among `pids` (the engine, or the shim that stands for a forked one). */
function engineEnvironments(pids: number[]): string[] {
  return pids.flatMap((p) => {
    try {
      if (!readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('thinkfl_engine')) return [];
      return [readFileSync(`/proc/${p}/environ`, 'utf8')];
    } catch {
      return [];
    }
  });
}

function filesUnder(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .map((f) => join(root, f))
    .filter((f) => statSync(f).isFile());
}

const hostPort = () => redis.url.replace(/^redis:\/\//, '');

describe('the Redis password', () => {
  it.each([
    [
      'REDIS_PASSWORD, for an ACL user',
      'secret-env',
      ALICE_PASSWORD,
      () => ({ env: { REDIS_PASSWORD: ALICE_PASSWORD, THINKFL_REDIS_URL: `redis://alice@${hostPort()}` } }),
    ],
    [
      'a URL in THINKFL_REDIS_URL',
      'secret-url',
      DEFAULT_PASSWORD,
      () => ({ env: { THINKFL_REDIS_URL: `redis://:${DEFAULT_PASSWORD}@${hostPort()}` } }),
    ],
    [
      'a URL in the config (queue.redis_url)',
      'secret-config',
      DEFAULT_PASSWORD,
      () => ({ env: {}, url: `redis://:${DEFAULT_PASSWORD}@${hostPort()}` }),
    ],
  ] as const)(
    'given as %s appears in no log, run file, status output, command line or engine environment',
    async (_how, name, password, envOf) => {
      const given: { env: Record<string, string>; url?: string } = envOf();
      const env = given.env;
      const config = writeConfig(name, given.url);
      const runDir = join(dir, 'runs', name);
      const workers = [start(['worker', 'train', '--config', config], env), start(['worker', 'rollout', '--config', config], env)];
      const controller = start(['train', config], env);
      const procs = [controller, ...workers];
      const seen = new Set<string>();
      const engineEnvs = new Set<string>();
      const watch = setInterval(() => {
        const pids = tree(procs.map((p) => p.child.pid!));
        for (const c of cmdlines(pids)) seen.add(c);
        for (const e of engineEnvironments(pids)) engineEnvs.add(e);
      }, 100);
      const code = await controller.exited;
      clearInterval(watch);
      for (const w of workers) w.child.kill('SIGTERM');
      const workerCodes = await Promise.all(workers.map((w) => w.exited));
      const logs = procs.map((p) => p.output.join(''));
      expect(code, logs[0]).toBe(0);
      expect(workerCodes).toEqual([0, 0]);
      expect(readState(runDir)?.done).toBe(true);
      // The tree was seen: the controller, both workers and the train engine.
      expect([...seen].some((c) => c.includes('thinkfl_engine'))).toBe(true);
      expect([...seen].filter((c) => c.includes('trainer-ctl.mjs')).length).toBeGreaterThanOrEqual(3);
      for (const c of seen) expect(c).not.toContain(password);
      expect(engineEnvs.size).toBeGreaterThan(0);
      for (const e of engineEnvs) expect(e).not.toContain(password);
      for (const l of logs) expect(l).not.toContain(password);
      expect(logs[1]).toMatch(/ready on redis:\/\/(alice)?:\*\*\*@127\.0\.0\.1:\d+ /);

      const files = filesUnder(runDir);
      expect(files.map((f) => f.slice(runDir.length + 1))).toEqual(expect.arrayContaining(['run.json', 'config.yaml', 'state.json']));
      for (const f of files) expect(readFileSync(f).includes(password), f).toBe(false);
      expect(JSON.parse(readFileSync(join(runDir, 'run.json'), 'utf8')).redis_url).toMatch(/^redis:\/\/(alice)?:\*\*\*@127\.0\.0\.1:\d+$/);

      for (const args of [[], ['--json']]) {
        const withEnv = spawnSync(process.execPath, [CLI, 'status', runDir, ...args], {
          cwd: REPO_ROOT,
          encoding: 'utf8',
          env: { ...process.env, ...env },
        });
        expect(withEnv.status, withEnv.stderr).toBe(0);
        expect(withEnv.stdout + withEnv.stderr).not.toContain(password);
        // A password only in the config file reaches status through the environment or --redis.
        if (given.url) expect(withEnv.stdout).toContain('password is not recorded');
        else expect(withEnv.stdout).toContain(args.length ? '"workers": [' : 'workers alive: 0');
        // Without the environment: run.json's redacted URL, and a note of what is missing.
        const clean = { ...process.env };
        delete clean.REDIS_PASSWORD;
        delete clean.THINKFL_REDIS_URL;
        const without = spawnSync(process.execPath, [CLI, 'status', runDir, ...args], { cwd: REPO_ROOT, encoding: 'utf8', env: clean });
        expect(without.status, without.stderr).toBe(0);
        expect(without.stdout).toContain('password is not recorded; set REDIS_PASSWORD or THINKFL_REDIS_URL');
      }
    },
    900_000,
  );
});

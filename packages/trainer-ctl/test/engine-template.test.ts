/**
 * Engines forked from an engine template (templates.ts, template.py, shim.py) against engines
 * started as fresh Python processes: the same answers, the same exits and kills as the driver sees
 * them, one template for the engines of several processes, its idle exit, its exit when the
 * engine's code changed, a refusal that falls back to a fresh engine, and no template where its
 * socket's directory is not private.
 */
import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, chmodSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_DIR, ENGINE_PYTHON, TrainEngine, type EngineOptions } from '../src/engine';
import { REPO_ROOT } from '../../../testkit/nezha';
import { RAGGED_IDS, TINY_CONFIG } from './engine-fixtures';

const stat = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
const parentOf = (pid: number) => Number(stat(pid)[1]);
const sessionOf = (pid: number) => Number(stat(pid)[3]);
const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
const isTemplate = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('thinkfl_engine.template');

/** A directory for template sockets of this file alone, private as the driver wants it. */
function socketDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'engine-template-sockets-'));
  chmodSync(dir, 0o700);
  return dir;
}

/** A forked engine logs its own pid ("ready (pid N)"); the driver's process is the shim. */
async function started(templateDir: string, opts: EngineOptions = {}): Promise<{ engine: TrainEngine; pid: number; log: () => string }> {
  let log = '';
  const engine = new TrainEngine({ launch: 'fork', templateDir, onStderr: (t) => (log += t), ...opts });
  await engine.request('info', {});
  const pid = Number(/ready \(pid (\d+)\)/.exec(log)?.[1]);
  return { engine, pid, log: () => log };
}

async function gone(pid: number, ms = 5000): Promise<boolean> {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await new Promise((r) => setTimeout(r, 50))) if (!alive(pid)) return true;
  return false;
}

describe('engines forked from a template', () => {
  const dir = socketDir();
  const modelDir = join(mkdtempSync(join(tmpdir(), 'engine-template-')), 'model');

  beforeAll(async () => {
    const engine = new TrainEngine({ launch: 'spawn' });
    await engine.request('create_tiny', { out_dir: modelDir, config: TINY_CONFIG, seed: 1 });
    await engine.shutdown();
  });

  it('answers as a fresh engine does, each engine a child of one template in a session of its own', async () => {
    const logprobs = async (engine: TrainEngine) => {
      await engine.request('load', { model_dir: modelDir, seed: 0, optimizer: { lr: 3e-3 } });
      const step = await engine.request('sft_step', {
        input_ids: RAGGED_IDS,
        mask: RAGGED_IDS.map((r) => r.map((_, t) => (t > 0 ? 1 : 0))),
      });
      const { logprobs } = await engine.request('logprobs', { input_ids: RAGGED_IDS });
      return { loss: step.loss, logprobs };
    };
    const fresh = new TrainEngine({ launch: 'spawn' });
    const want = await logprobs(fresh);
    await fresh.shutdown();
    const a = await started(dir);
    const b = await started(dir);
    expect(a.pid).not.toBe(a.engine.pid);
    const template = parentOf(a.pid);
    expect(parentOf(b.pid)).toBe(template);
    expect(isTemplate(template)).toBe(true);
    expect(parentOf(template)).not.toBe(process.pid);
    expect(sessionOf(template)).toBe(template);
    expect(await logprobs(a.engine)).toEqual(want);
    expect(await logprobs(b.engine)).toEqual(want);
    await a.engine.shutdown();
    await b.engine.shutdown();
    expect(await gone(a.pid)).toBe(true);
    await expect(a.engine.request('info', {})).rejects.toThrow(/code 0, signal null/);
  });

  it('dies with its shim, and the driver sees a killed engine as killed', async () => {
    const a = await started(dir);
    const pending = a.engine.request('gradcheck', {});
    process.kill(a.engine.pid!, 'SIGKILL');
    await expect(pending).rejects.toThrow(/signal SIGKILL/);
    expect(await gone(a.pid)).toBe(true);

    const b = await started(dir);
    process.kill(b.pid, 'SIGKILL');
    await expect(b.engine.request('gradcheck', {})).rejects.toThrow(/signal SIGKILL/);
    await b.engine.exited;
    expect(alive(b.engine.pid!)).toBe(false);
  });

  it('passes SIGTERM on to the engine, and its exit code back', async () => {
    const a = await started(dir);
    process.kill(a.engine.pid!, 'SIGTERM');
    await expect(a.engine.request('gradcheck', {})).rejects.toThrow(/signal SIGTERM/);
    expect(await gone(a.pid)).toBe(true);
  });

  it("forks another process's engines from the template this process started, after that process exited", async () => {
    const a = await started(dir);
    const template = parentOf(a.pid);
    await a.engine.shutdown();
    const script = [
      "import { readFileSync } from 'node:fs';",
      "import { TrainEngine } from './packages/trainer-ctl/src/engine';",
      "let log = '';",
      `const e = new TrainEngine({ launch: 'fork', templateDir: ${JSON.stringify(dir)}, onStderr: (t) => (log += t) });`,
      "await e.request('info', {});",
      'const pid = /ready \\(pid (\\d+)\\)/.exec(log)[1];',
      "console.log(readFileSync('/proc/' + pid + '/stat', 'utf8').split(') ')[1].split(' ')[1]);",
      'await e.shutdown();',
    ].join('\n');
    const other = () =>
      Number(
        execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: REPO_ROOT, encoding: 'utf8' })
          .trim()
          .split('\n')
          .pop(),
      );
    expect(other()).toBe(template);
    expect(other()).toBe(template);
    expect(alive(template)).toBe(true);
  });

  it('starts one template for engines that start at once', async () => {
    const own = socketDir();
    const engines = await Promise.all([started(own), started(own), started(own)]);
    const templates = new Set(engines.map((e) => parentOf(e.pid)));
    expect(templates.size).toBe(1);
    expect(isTemplate([...templates][0])).toBe(true);
    await Promise.all(engines.map((e) => e.engine.shutdown()));
  });

  it('leaves once it had no engine for its idle time, and takes its socket, lock and log with it', async () => {
    const own = socketDir();
    const idle = { env: { THINKFL_ENGINE_TEMPLATE_IDLE_S: '1' } };
    const a = await started(own, idle);
    const template = parentOf(a.pid);
    await new Promise((r) => setTimeout(r, 1500));
    expect(alive(template)).toBe(true); // an engine is running
    await a.engine.shutdown();
    expect(await gone(template, 10_000)).toBe(true);
    expect(readdirSync(own)).toEqual([]); // its socket, lock and log
    const b = await started(own, idle);
    expect(parentOf(b.pid)).not.toBe(template);
    expect(isTemplate(parentOf(b.pid))).toBe(true);
    await b.engine.shutdown();
  });

  it('ends the engine when the template is killed, and the next engine forks from a new template', async () => {
    const own = socketDir();
    const a = await started(own);
    const template = parentOf(a.pid);
    process.kill(template, 'SIGKILL');
    await expect(a.engine.request('gradcheck', {})).rejects.toThrow(/exited[\s\S]*exit status is lost/);
    expect(await gone(a.pid)).toBe(true);
    const b = await started(own);
    expect(parentOf(b.pid)).not.toBe(template);
    expect(isTemplate(parentOf(b.pid))).toBe(true);
    await b.engine.shutdown();
  });

  it('leaves when the engine code changed, so that no engine runs the old code', async () => {
    const own = socketDir();
    const engineDir = join(mkdtempSync(join(tmpdir(), 'engine-template-code-')), 'engine');
    cpSync(ENGINE_DIR, engineDir, { recursive: true, filter: (f) => !f.includes('__pycache__') });
    const a = await started(own, { engineDir });
    const template = parentOf(a.pid);
    await a.engine.shutdown();
    appendFileSync(join(engineDir, 'thinkfl_engine', 'ops.py'), '\nCHANGED = 1\n');
    const b = await started(own, { engineDir });
    expect(b.log()).toMatch(/starting the engine in this process: the engine code changed since the template started: .*ops\.py/);
    expect(b.pid).toBe(b.engine.pid);
    await b.engine.shutdown();
    expect(await gone(template)).toBe(true);
    const c = await started(own, { engineDir });
    expect(isTemplate(parentOf(c.pid))).toBe(true);
    expect(parentOf(c.pid)).not.toBe(template);
    await c.engine.shutdown();
  });

  it('is refused for another environment, and the shim then starts the engine itself', async () => {
    const a = await started(dir);
    const template = parentOf(a.pid);
    await a.engine.shutdown();
    const socket = readFileSync(`/proc/${template}/cmdline`, 'utf8').split('\0')[3];
    const env = { ...process.env, OMP_WAIT_POLICY: 'PASSIVE', PYTHONPATH: ENGINE_DIR, PYTHONUNBUFFERED: '1', OTHER: '1' };
    const shim = spawn(ENGINE_PYTHON, ['-I', '-S', join(ENGINE_DIR, 'thinkfl_engine', 'shim.py'), socket], { env });
    let err = '';
    shim.stderr.on('data', (b: Buffer) => (err += b));
    shim.stdin.write(`${JSON.stringify({ id: 1, op: 'info', args: {} })}\n`);
    const line = await new Promise<string>((r) => createInterface({ input: shim.stdout }).once('line', r));
    expect(JSON.parse(line)).toMatchObject({ id: 1, ok: true });
    expect(err).toMatch(/starting the engine in this process: another environment \(OTHER\)/);
    expect(parentOf(Number(/ready \(pid (\d+)\)/.exec(err)?.[1]))).toBe(process.pid);
    shim.stdin.end();
    await new Promise((r) => shim.on('close', r));
  });

  it('names a template idle time that is not a number of seconds', () => {
    for (const idle of ['soon', 'Infinity', '-1'])
      expect(() => new TrainEngine({ launch: 'fork', templateDir: dir, env: { THINKFL_ENGINE_TEMPLATE_IDLE_S: idle } })).toThrow(
        `THINKFL_ENGINE_TEMPLATE_IDLE_S must be a number of seconds (0 or more), got ${idle}`,
      );
  });

  it('spawns the engine where the socket directory is open to other users', async () => {
    const open = socketDir();
    chmodSync(open, 0o755);
    const a = await started(open);
    expect(a.pid).toBe(a.engine.pid);
    expect(readdirSync(open)).toEqual([]);
    await a.engine.shutdown();
  });
});

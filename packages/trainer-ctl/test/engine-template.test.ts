/**
 * Engines forked from an engine template (templates.ts, template.py, shim.py) against engines
 * started as fresh Python processes: the same answers, the same exits and kills as the driver sees
 * them, a refusal that falls back to a fresh engine, and no template left once its process exits.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_DIR, ENGINE_PYTHON, EngineTemplates, TrainEngine } from '../src/engine';
import { REPO_ROOT } from '../../../testkit/nezha';
import { RAGGED_IDS, TINY_CONFIG } from './engine-fixtures';

const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

/** A forked engine logs its own pid ("ready (pid N)"); the driver's process is the shim. */
async function started(templates: EngineTemplates): Promise<{ engine: TrainEngine; pid: number; log: () => string }> {
  let log = '';
  const engine = new TrainEngine({ launch: 'fork', templates, onStderr: (t) => (log += t) });
  await engine.request('info', {});
  const pid = Number(/ready \(pid (\d+)\)/.exec(log)?.[1]);
  return { engine, pid, log: () => log };
}

async function gone(pid: number, ms = 5000): Promise<boolean> {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await new Promise((r) => setTimeout(r, 50))) if (!alive(pid)) return true;
  return false;
}

describe('engines forked from a template', () => {
  const templates = new EngineTemplates();
  const modelDir = join(mkdtempSync(join(tmpdir(), 'engine-template-')), 'model');

  beforeAll(async () => {
    const engine = new TrainEngine({ launch: 'spawn' });
    await engine.request('create_tiny', { out_dir: modelDir, config: TINY_CONFIG, seed: 1 });
    await engine.shutdown();
  });

  it('answers as a fresh engine does, each engine a child of the one template', async () => {
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
    const a = await started(templates);
    const b = await started(templates);
    expect(a.pid).not.toBe(a.engine.pid);
    expect(parentOf(a.pid)).toBe(parentOf(b.pid));
    expect(parentOf(a.pid)).not.toBe(process.pid);
    expect(readFileSync(`/proc/${parentOf(a.pid)}/cmdline`, 'utf8')).toContain('thinkfl_engine.template');
    expect(await logprobs(a.engine)).toEqual(want);
    expect(await logprobs(b.engine)).toEqual(want);
    await a.engine.shutdown();
    await b.engine.shutdown();
    expect(await gone(a.pid)).toBe(true);
    await expect(a.engine.request('info', {})).rejects.toThrow(/code 0, signal null/);
  });

  it('dies with its shim, and the driver sees a killed engine as killed', async () => {
    const a = await started(templates);
    const pending = a.engine.request('gradcheck', {});
    process.kill(a.engine.pid!, 'SIGKILL');
    await expect(pending).rejects.toThrow(/signal SIGKILL/);
    expect(await gone(a.pid)).toBe(true);

    const b = await started(templates);
    process.kill(b.pid, 'SIGKILL');
    await expect(b.engine.request('gradcheck', {})).rejects.toThrow(/signal SIGKILL/);
    await b.engine.exited;
    expect(alive(b.engine.pid!)).toBe(false);
  });

  it('passes SIGTERM on to the engine, and its exit code back', async () => {
    const a = await started(templates);
    process.kill(a.engine.pid!, 'SIGTERM');
    await expect(a.engine.request('gradcheck', {})).rejects.toThrow(/signal SIGTERM/);
    expect(await gone(a.pid)).toBe(true);
  });

  it('ends the engine when the template is killed, and the next engine forks from a new template', async () => {
    const own = new EngineTemplates();
    const a = await started(own);
    const template = parentOf(a.pid);
    process.kill(template, 'SIGKILL');
    await expect(a.engine.request('gradcheck', {})).rejects.toThrow(/exited[\s\S]*exit status is lost/);
    expect(await gone(a.pid)).toBe(true);
    const b = await started(own);
    expect(parentOf(b.pid)).not.toBe(template);
    expect(readFileSync(`/proc/${parentOf(b.pid)}/cmdline`, 'utf8')).toContain('thinkfl_engine.template');
    await b.engine.shutdown();
  });

  it('is refused for another environment, and the shim then starts the engine itself', async () => {
    const a = await started(templates);
    const template = parentOf(a.pid);
    await a.engine.shutdown();
    const socket = readFileSync(`/proc/${template}/cmdline`, 'utf8').split('\0')[3];
    const env = { ...process.env, OMP_WAIT_POLICY: 'PASSIVE', PYTHONPATH: ENGINE_DIR, PYTHONUNBUFFERED: '1', OTHER: '1' };
    const shim = spawn(ENGINE_PYTHON, ['-I', '-S', join(ENGINE_DIR, 'thinkfl_engine', 'shim.py'), socket, String(template)], { env });
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

  it('leaves no template running once the process that started it exits', async () => {
    const script = [
      "import { readFileSync } from 'node:fs';",
      "import { TrainEngine } from './packages/trainer-ctl/src/engine';",
      "let log = '';",
      "const e = new TrainEngine({ launch: 'fork', onStderr: (t) => (log += t) });",
      "await e.request('info', {});",
      'const pid = /ready \\(pid (\\d+)\\)/.exec(log)[1];',
      "const template = readFileSync('/proc/' + pid + '/stat', 'utf8').split(') ')[1].split(' ')[1];",
      "console.log(template, readFileSync('/proc/' + template + '/cmdline', 'utf8').includes('thinkfl_engine.template'));",
      'await e.shutdown();',
    ].join('\n');
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    const [template, isTemplate] = out.trim().split('\n').pop()!.split(' ');
    expect(isTemplate).toBe('true');
    expect(await gone(Number(template))).toBe(true);
  });
});

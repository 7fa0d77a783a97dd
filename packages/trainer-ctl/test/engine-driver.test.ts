/** The TypeScript driver against the real engine process: errors, timeouts, crashes, shutdown. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EngineError, TrainEngine } from '../src/engine';

describe('TrainEngine driver', () => {
  it('answers requests by id, reports op failures and keeps serving', async () => {
    const engine = new TrainEngine();
    try {
      const [info, failed, after] = await Promise.allSettled([
        engine.request('info', {}),
        engine.request('grpo_step', { input_ids: [[1, 2]], mask: [[0, 1]], advantages: [1] }),
        engine.request('info', {}),
      ]);
      expect(info.status === 'fulfilled' && info.value.loaded).toBe(false);
      expect(failed.status).toBe('rejected');
      const err = (failed as PromiseRejectedResult).reason as EngineError;
      expect(err).toBeInstanceOf(EngineError);
      expect(err.kind).toBe('failed');
      expect(err.message).toMatch(/no model loaded/);
      expect(err.traceback).toMatch(/Traceback/);
      expect(after.status).toBe('fulfilled');
      await expect(engine.request('load', {} as never)).rejects.toThrow(/missing argument 'model_dir'/);
    } finally {
      await engine.shutdown();
    }
    expect(engine.dead).toBe(true);
    await expect(engine.request('info', {})).rejects.toThrow(/exited/);
  });

  it('times out a request, kills the engine and rejects the rest', async () => {
    const engine = new TrainEngine();
    // Far shorter than a gradient check, even on an engine forked from a template (no import to wait for).
    const slow = engine.request('gradcheck', {}, 50);
    const queued = engine.request('info', {});
    await expect(slow).rejects.toMatchObject({ kind: 'timeout' });
    await expect(queued).rejects.toThrow(/killed after gradcheck timed out/);
    expect(engine.dead).toBe(true);
    await engine.dispose();
  });

  it('rejects pending requests with the stderr tail when the engine dies', async () => {
    const engine = new TrainEngine();
    await engine.request('info', {});
    const pending = engine.request('gradcheck', {});
    process.kill(engine.pid!, 'SIGKILL');
    const err = (await pending.catch((e) => e)) as EngineError;
    expect(err.kind).toBe('exited');
    expect(err.message).toMatch(/signal SIGKILL/);
    expect(err.message).toMatch(/engine stderr \(tail\)[\s\S]*ready/);
  });

  it('reports an engine that cannot start, with its stderr, instead of hanging', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'no-engine-'));
    const noPackage = new TrainEngine({ engineDir: empty });
    await expect(noPackage.request('info', {})).rejects.toThrow(/No module named thinkfl_engine/);
    const noPython = new TrainEngine({ python: join(empty, 'python3') });
    await expect(noPython.request('info', {})).rejects.toThrow(/could not be started/);
  });
});

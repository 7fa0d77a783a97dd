/**
 * An engine on 2 ranks whose launcher (torchrun) is killed outright is seen to die: its ranks go
 * with it (engine/thinkfl_engine/distributed.py, die_with_launcher), so the pipes close and the
 * train worker restarts it from its latest checkpoint. Without that, rank 0 kept the inherited
 * stdio open and went on answering requests as if nothing had happened.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TrainEngine } from '../src/engine';
import { alive } from './train-fixtures';

/** The pids whose parent is `pid` (Linux /proc). */
function childrenOf(pid: number): number[] {
  const tasks = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return tasks ? tasks.split(/\s+/).map(Number) : [];
}

/** Not yet exited: a zombie (exited, not yet reaped by this process) does not count. */
function running(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0] !== 'Z';
  } catch {
    return false;
  }
}

describe('an engine whose launcher is killed', () => {
  it('ends with its ranks, and later requests are refused as an exited engine', async () => {
    const engine = new TrainEngine({ ranks: 2 });
    try {
      // Answered by rank 0 once both ranks have joined the group.
      await engine.request('info', {}, 300_000);
      const launcher = engine.pid!;
      const ranks = childrenOf(launcher);
      expect(ranks).toHaveLength(2);
      process.kill(launcher, 'SIGKILL');
      while (running(launcher)) await new Promise((r) => setTimeout(r, 5));
      // The next request, sent once the launcher is gone, is not answered by a rank that outlived it.
      const next = engine.request('info', {}).then(
        () => 'answered',
        (e: { kind?: string }) => e.kind,
      );
      // A liveness bound, not a timing: the engine never ends without the fix.
      const ended = await Promise.race([engine.exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 120_000))]);
      expect(ended, 'the engine was still answering 120 s after its launcher was killed').toBe(true);
      expect(engine.dead).toBe(true);
      for (let i = 0; i < 100 && ranks.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
      expect(ranks.filter(alive)).toEqual([]);
      expect(await next).toBe('exited');
      await expect(engine.request('info', {})).rejects.toMatchObject({ kind: 'exited' });
    } finally {
      await engine.dispose();
    }
  }, 400_000);
});

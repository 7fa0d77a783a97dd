/**
 * The train worker's engine supervisor on its own (no Redis, no queue), with a real engine on a
 * real tiny model: it opens the base model, takes the KL reference and resets the optimizer once
 * per stage (grpo.reference stage_start, grpo.optimizer.reset stage), and after the engine is
 * SIGKILLed starts a new one from the latest checkpoint at or before the target update. What the
 * new engine reports on load (the tags its checkpoint restored, read back by the Python engine)
 * shows the supervisor set them, and it takes neither again.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunConfig } from '../src/config/index';
import { checkpointDir, EngineSupervisor, syncTree, writeAtomically, writeTrainerState } from '../src/workers/index';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { scratch, writeRunConfig } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

let dir: string | undefined;
let model: string;
let config: RunConfig;
let runDir: string;

beforeAll(async () => {
  await ensureNezhaDataset();
  dir = scratch('supervisor');
  model = await createTinyModel(join(dir, 'model'), 4);
  const loaded = writeRunConfig(dir, 'supervisor', model, '', { train: '{ autocast: float32 }' });
  config = { ...loaded.config, grpo: { ...loaded.config.grpo, reference: 'stage_start' } };
  runDir = loaded.runDir;
}, 600_000);
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('engine supervisor', () => {
  it('opens, keeps the KL reference and the optimizer reset per stage, and restarts a killed engine from the right checkpoint', async () => {
    const logs: string[] = [];
    const supervisor = new EngineSupervisor({ config, runDir, log: (l) => logs.push(l) });
    const count = (re: RegExp) => logs.filter((l) => re.test(l)).length;
    try {
      expect(supervisor.dead).toBe(true);
      expect(() => supervisor.engine).toThrow('train engine: not open');
      expect(await supervisor.open(undefined)).toBe(0);
      expect(supervisor.origin).toBeUndefined();
      expect(supervisor.dead).toBe(false);
      expect(logs.some((l) => l.startsWith(`engine loaded ${model}: `) && !l.includes('KL reference'))).toBe(true);

      // Taken once per stage, whatever the number of updates that ask.
      await supervisor.ensureReference('priming', 0);
      await supervisor.ensureReference('priming', 1);
      await supervisor.ensureFreshOptimizer('priming', 0);
      await supervisor.ensureFreshOptimizer('priming', 1);
      expect(count(/^KL reference: the policy before update 0 \(stage_start:priming\)$/)).toBe(1);
      expect(count(/^KL reference:/)).toBe(1);
      expect(count(/^optimizer reset before update 0 \(grpo.optimizer.reset stage\)/)).toBe(1);
      await supervisor.ensureFreshOptimizer('exploration', 2);
      expect(count(/^optimizer reset before update 2/)).toBe(1);

      // A checkpoint after 2 updates, written as the update runner writes one.
      const ckpt = checkpointDir(runDir, 2);
      await writeAtomically(ckpt, async (tmp) => {
        await supervisor.engine.request('save', { dir: tmp });
        writeTrainerState(tmp, 2);
        syncTree(tmp);
      });

      const killed = supervisor.pid!;
      process.kill(killed, 'SIGKILL');
      await supervisor.engine.exited;
      expect(supervisor.dead).toBe(true);

      // Target 3: the checkpoint after 2 updates, with the tags the engine saved in it.
      expect(await supervisor.restart(3)).toBe(2);
      expect(supervisor.pid).not.toBe(killed);
      expect(supervisor.origin).toBe(ckpt);
      expect(
        logs.some(
          (l) =>
            l.startsWith(`engine loaded checkpoint ${ckpt} (2 updates): `) &&
            l.endsWith(', KL reference stage_start:priming, optimizer since reset stage:exploration'),
        ),
      ).toBe(true);
      await supervisor.ensureReference('priming', 2);
      await supervisor.ensureFreshOptimizer('exploration', 2);
      expect(count(/^KL reference:/)).toBe(1);
      expect(count(/^optimizer reset before/)).toBe(2);

      // Target 1: no checkpoint at or before it, so the base model again, with nothing restored.
      expect(await supervisor.restart(1)).toBe(0);
      expect(supervisor.origin).toBeUndefined();
      await supervisor.ensureReference('priming', 0);
      expect(count(/^KL reference:/)).toBe(2);
    } finally {
      await supervisor.shutdown();
    }
  }, 600_000);
});

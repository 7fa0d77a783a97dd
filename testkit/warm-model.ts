/**
 * A CPU preset's tiny model after the preset's own SFT (3 epochs, not the preset's count: the
 * format is learned by then, at a fraction of the time), built once by the real `trainer-ctl
 * train` (SFT only) and kept in .cache/models/<preset>-sft while the preset's YAML is unchanged.
 * Fault tests start from it: a model that has learned the call format gives GRPO groups whose
 * rewards differ, so their steps make updates (an untrained model's groups are all equal, and
 * skip_equal_groups would leave a stage without a single update to fault).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { withLock } from './build-cache';
import { NEZHA_DATASET, REPO_ROOT } from './nezha';

const CLI = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
/** What a checkpoint holds beside the model: none of it belongs to a base model dir. */
const NOT_MODEL = new Set(['optimizer.pt', 'reference', 'deepspeed', 'onnx', 'trainer-state.json']);

/** How the preset's SFT is changed for the warm model: fewer epochs, one policy export per epoch. */
const SFT = { epochs: 3, steps_per_update: 300 };

/** The model dir of `preset` after its SFT (built on first use, then reused). */
export async function ensureWarmModel(preset = 'tiny-cpu'): Promise<string> {
  const yamlText = readFileSync(join(REPO_ROOT, 'configs', `${preset}.yaml`), 'utf8');
  const fingerprint = createHash('sha1').update(yamlText).update(JSON.stringify(SFT)).digest('hex');
  const out = join(REPO_ROOT, '.cache', 'models', `${preset}-sft`);
  // Beside the dir, not in it: every file in a model dir is carried into its checkpoints.
  const stamp = `${out}.fingerprint`;
  const done = () => existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === fingerprint;
  mkdirSync(join(REPO_ROOT, '.cache', 'models'), { recursive: true });
  await withLock(`${out}.lock`, done, () => {
    const scratch = mkdtempSync(join(tmpdir(), `warm-${preset}-`));
    try {
      const config = parse(yamlText) as Record<string, Record<string, unknown>>;
      config.run = { ...config.run, name: `${preset}-sft`, base_dir: REPO_ROOT };
      config.model = { ...config.model, dir: join(scratch, 'model') };
      config.dataset = { ...config.dataset, path: NEZHA_DATASET, max_eval_cases: 1 };
      const stages = config.stages as Record<string, Record<string, unknown>>;
      const priming = stages.priming as { sft: Record<string, unknown> };
      config.stages = {
        ...stages,
        priming: { ...priming, sft: { ...priming.sft, ...SFT }, steps: 0 },
        exploration: { enabled: false },
        refinement: { enabled: false },
      };
      const file = join(scratch, 'warm.yaml');
      writeFileSync(file, stringify(config));
      const runDir = join(scratch, 'run');
      execFileSync(process.execPath, [CLI, 'train', file, '--run-dir', runDir], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
      const state = JSON.parse(readFileSync(join(runDir, 'state.json'), 'utf8')) as { checkpoint: string };
      const tmp = `${out}.tmp-${process.pid}`;
      rmSync(tmp, { recursive: true, force: true });
      mkdirSync(tmp);
      for (const name of readdirSync(state.checkpoint))
        if (!NOT_MODEL.has(name)) cpSync(join(state.checkpoint, name), join(tmp, name), { recursive: true });
      rmSync(out, { recursive: true, force: true });
      renameSync(tmp, out);
      writeFileSync(stamp, `${fingerprint}\n`);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
  return out;
}

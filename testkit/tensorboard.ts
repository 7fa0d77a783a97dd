/**
 * TensorBoard's own event-file reader for the tests: a virtual environment under .cache/ with
 * tensorboard at a pinned version from PyPI (made once, reused), and a reader script that
 * prints every scalar of a log directory as JSON through EventAccumulator.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './nezha';

export const TENSORBOARD_VERSION = '2.21.0';
const VENV = join(REPO_ROOT, '.cache', `venv-tensorboard-${TENSORBOARD_VERSION}`);
const PYTHON = join(VENV, 'bin', 'python');

export function ensureTensorboard(): string {
  const ok = () => {
    try {
      return (
        execFileSync(PYTHON, ['-c', 'import tensorboard; print(tensorboard.__version__)'], { encoding: 'utf8' }).trim() ===
        TENSORBOARD_VERSION
      );
    } catch {
      return false;
    }
  };
  if (existsSync(PYTHON) && ok()) return PYTHON;
  execFileSync('python3', ['-m', 'venv', '--clear', VENV], { stdio: 'inherit' });
  execFileSync(PYTHON, ['-m', 'pip', 'install', '--quiet', `tensorboard==${TENSORBOARD_VERSION}`], { stdio: 'inherit' });
  if (!ok()) throw new Error(`tensorboard ${TENSORBOARD_VERSION} did not install into ${VENV}`);
  return PYTHON;
}

const READER = `
import json, math, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={'scalars': 0})
acc.Reload()
out = {}
for tag in acc.Tags()['scalars']:
    out[tag] = [[e.step, None if math.isnan(e.value) else e.value] for e in acc.Scalars(tag)]
print(json.dumps(out))
`;

/** Every scalar tag of a log directory as TensorBoard reads it: tag -> [step, value (null for NaN)][]. */
export function readTensorboardScalars(logDir: string): Record<string, [number, number | null][]> {
  const python = ensureTensorboard();
  return JSON.parse(execFileSync(python, ['-c', READER, logDir], { encoding: 'utf8', maxBuffer: 1 << 26 }));
}

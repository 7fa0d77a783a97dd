/**
 * The peers' environments, built on first use (not by scripts/setup.sh), so that the product's
 * dependencies do not grow:
 *   - .cache/venv-peers: TRL, onnxruntime-genai and pandas at the versions of requirements.txt.
 *     torch, transformers, onnxruntime and numpy are the product venv's (.cache/venv), reached
 *     through a .pth file: PyPI's torch wheel brings GBs of CUDA libraries, and the CPU index
 *     (download.pytorch.org) is not reachable from this project's machines. The peers then also
 *     run the very torch and transformers the engine runs.
 *   - .cache/peers-node: transformers.js (@huggingface/transformers, PEER_NODE_PACKAGES), installed with
 *     its install scripts off, outside the workspaces (no product or dev dependency).
 * Each is rebuilt when its pins change (a stamp file holds them).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..', '..');
export const PRODUCT_PYTHON = join(REPO_ROOT, '.cache', 'venv', 'bin', 'python');
export const PEERS_VENV = join(REPO_ROOT, '.cache', 'venv-peers');
export const PEERS_NODE = join(REPO_ROOT, '.cache', 'peers-node');
const REQUIREMENTS = join(import.meta.dirname, 'requirements.txt');
/** transformers.js and the version the bench is measured with. */
export const PEER_NODE_PACKAGES = { '@huggingface/transformers': '4.3.1' };

const log = (line: string) => process.stderr.write(`peers: ${line}\n`);

function stamped(dir: string, pins: string): boolean {
  const stamp = join(dir, '.pins');
  return existsSync(stamp) && readFileSync(stamp, 'utf8') === pins;
}

/** The peers venv's python, building the venv first when it is missing or its pins changed. */
export function ensurePeersVenv(): string {
  const python = join(PEERS_VENV, 'bin', 'python');
  const pins = readFileSync(REQUIREMENTS, 'utf8');
  if (stamped(PEERS_VENV, pins)) return python;
  if (!existsSync(PRODUCT_PYTHON))
    throw new Error(`${PRODUCT_PYTHON} is missing: run bash scripts/setup.sh first (the peers reuse its torch)`);
  const started = Date.now();
  log(`building ${PEERS_VENV} from ${REQUIREMENTS} on top of the product venv's torch`);
  rmSync(PEERS_VENV, { recursive: true, force: true });
  // The product venv's interpreter: its site-packages path is the one the .pth names.
  const base = execFileSync(PRODUCT_PYTHON, ['-c', 'import sys; print(sys._base_executable)'], { encoding: 'utf8' }).trim();
  execFileSync(base, ['-m', 'venv', PEERS_VENV], { stdio: 'inherit' });
  const productSite = execFileSync(PRODUCT_PYTHON, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], {
    encoding: 'utf8',
  }).trim();
  const peersSite = execFileSync(python, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], { encoding: 'utf8' }).trim();
  // After the venv's own site-packages on sys.path: the peers' pins win over the product's.
  writeFileSync(join(peersSite, 'product-venv.pth'), `${productSite}\n`);
  execFileSync(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', REQUIREMENTS], { stdio: 'inherit' });
  writeFileSync(join(PEERS_VENV, '.pins'), pins);
  log(`built ${PEERS_VENV} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return python;
}

/** The directory whose node_modules holds transformers.js, installing it first when needed. */
export function ensurePeersNode(): string {
  const pins = JSON.stringify(PEER_NODE_PACKAGES);
  if (stamped(PEERS_NODE, pins)) return PEERS_NODE;
  const started = Date.now();
  log(
    `installing ${Object.entries(PEER_NODE_PACKAGES)
      .map(([n, v]) => `${n}@${v}`)
      .join(' ')} into ${PEERS_NODE} (install scripts off)`,
  );
  rmSync(PEERS_NODE, { recursive: true, force: true });
  mkdirSync(PEERS_NODE, { recursive: true });
  writeFileSync(
    join(PEERS_NODE, 'package.json'),
    JSON.stringify({ private: true, type: 'module', dependencies: PEER_NODE_PACKAGES }, null, 2),
  );
  // No install scripts: onnxruntime-node's would fetch its CUDA provider; its CPU binaries are in the package.
  execFileSync('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--no-save'], {
    cwd: PEERS_NODE,
    stdio: 'inherit',
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
  });
  writeFileSync(join(PEERS_NODE, '.pins'), pins);
  log(`installed transformers.js in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return PEERS_NODE;
}

// The CLI's sources bundled into one module, built on first use and again whenever a source it
// was built from changes (a build cache, as tsx caches each file). Why: through tsx's loader every
// process start resolved and loaded some 250 modules on a hook thread, 1.2-1.5 s and about 2 s of
// CPU a start, and a run starts a controller and a process per worker (docs/experiments.md, "The
// CI run's length" 4). The bundle holds the workspace's sources and the npm packages they use, but
// for RUNTIME_IMPORTS. Where the cache cannot be written or the sources do not build, the caller
// runs them through tsx.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const REPO_ROOT = resolve(import.meta.dirname, '..', '..', '..');
const CLI_SOURCE = resolve(import.meta.dirname, '..', 'src', 'cli.ts');
const CACHE_DIR = join(REPO_ROOT, '.cache', 'cli');
const MANIFEST = join(CACHE_DIR, 'manifest.json');
/** The generated entry's name in the bundle's source map (it is no file). */
const ENTRY_NAME = '<trainer-ctl entry>';
/**
 * Packages imported from node_modules at run time rather than bundled: native addons and
 * WebAssembly that their own code finds on disk. npm packages in the bundle are stamped by
 * node_modules/.package-lock.json, which every npm install or ci rewrites.
 */
const RUNTIME_IMPORTS = ['onnxruntime-node', 'msgpackr-extract', '@huggingface/hub', 'esbuild', 'tsx'];
const NPM_STAMP = join(REPO_ROOT, 'node_modules', '.package-lock.json');
const isWorkspace = (file) => !file.split(/[\\/]/).includes('node_modules');
/** Bundles kept besides the current one: a process that read the manifest just before a rebuild still finds its file. */
const KEEP_OLD = 2;

/** What a file's content is taken to be from: size and modification time (as make and tsx's cache do). */
const stamp = (file) => {
  const s = statSync(file, { throwIfNoEntry: false });
  return s ? `${s.size}:${s.mtimeMs}` : 'missing';
};

/**
 * The manifest's bundle when every file and folder it was built from is as it was. Folders count
 * because a file added to one (a new command) changes what the CLI would find there.
 */
function currentBundle() {
  let m;
  try {
    m = JSON.parse(readFileSync(MANIFEST, 'utf8'));
  } catch {
    return undefined;
  }
  for (const [rel, s] of Object.entries(m.inputs)) if (stamp(join(REPO_ROOT, rel)) !== s) return undefined;
  return join(CACHE_DIR, m.bundle);
}

/** Rewrites import.meta.{url,dirname,filename} to the source file's own, so paths relative to a source still resolve. */
const sourceMeta = (file, text) =>
  text
    .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(file).href))
    .replaceAll('import.meta.dirname', JSON.stringify(dirname(file)))
    .replaceAll('import.meta.filename', JSON.stringify(file));

async function build() {
  const { build: esbuild } = await import('esbuild');
  // Each file's stamp is taken before it is read: a file saved during the build then differs from
  // its stamp and the next start builds again.
  const stamps = new Map();
  const stampOnce = (f) => stamps.has(f) || stamps.set(f, stamp(f));
  const commandsDir = join(dirname(CLI_SOURCE), 'commands');
  stampOnce(commandsDir);
  stampOnce(NPM_STAMP);
  // The same files cli.ts lists; the bundle hands it their modules instead of importing them by path.
  const commandFiles = readdirSync(commandsDir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => join(commandsDir, f));
  const entry = [
    `import { main } from ${JSON.stringify(CLI_SOURCE)};`,
    ...commandFiles.map((f, i) => `import * as c${i} from ${JSON.stringify(f)};`),
    `const modules = new Map([${commandFiles.map((f, i) => `[${JSON.stringify(f)}, c${i}]`).join(', ')}]);`,
    'export const run = (argv) => main(argv, async (file) => modules.get(file));',
  ].join('\n');
  const result = await esbuild({
    stdin: { contents: entry, resolveDir: REPO_ROOT, sourcefile: ENTRY_NAME, loader: 'js' },
    bundle: true,
    write: false,
    outfile: join(CACHE_DIR, 'trainer-ctl.mjs'), // not written: it makes the source map's paths relative to the cache
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'inline',
    sourcesContent: false, // file and line are enough; the sources' text made the map 8 MB larger and each start 0.1 s slower
    // CommonJS packages inside an ES module: their require, __filename and __dirname.
    banner: {
      js: [
        "import { createRequire as __bundleRequire } from 'node:module';",
        "import { fileURLToPath as __bundlePath } from 'node:url';",
        "import { dirname as __bundleDir } from 'node:path';",
        'const require = __bundleRequire(import.meta.url);',
        'const __filename = __bundlePath(import.meta.url);',
        'const __dirname = __bundleDir(__filename);',
      ].join(' '),
    },
    metafile: true,
    logLevel: 'silent',
    plugins: [
      {
        name: 'source-locations',
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (a) =>
            RUNTIME_IMPORTS.some((p) => a.path === p || a.path.startsWith(`${p}/`)) ? { path: a.path, external: true } : undefined,
          );
          b.onLoad({ filter: /\.([cm]?[jt]s|json)$/ }, (a) => {
            if (isWorkspace(a.path)) {
              stampOnce(dirname(a.path));
              stampOnce(a.path);
            }
            const text = readFileSync(a.path, 'utf8');
            if (a.path.endsWith('.json')) return { contents: text, loader: 'json' };
            return { contents: sourceMeta(a.path, text), loader: a.path.endsWith('ts') ? 'ts' : 'js' };
          });
        },
      },
    ],
  });
  const code = result.outputFiles[0].text;
  for (const p of Object.keys(result.metafile.inputs)) {
    if (p === ENTRY_NAME || !isWorkspace(resolve(REPO_ROOT, p))) continue;
    stampOnce(dirname(resolve(REPO_ROOT, p)));
    stampOnce(resolve(REPO_ROOT, p));
  }
  const name = `trainer-ctl-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`;
  mkdirSync(CACHE_DIR, { recursive: true });
  const tmp = (f) => `${f}.tmp-${process.pid}`;
  writeFileSync(tmp(join(CACHE_DIR, name)), code);
  renameSync(tmp(join(CACHE_DIR, name)), join(CACHE_DIR, name));
  const inputs = [...stamps].sort(([a], [b]) => (a < b ? -1 : 1)).map(([f, s]) => [relative(REPO_ROOT, f), s]);
  const manifest = { bundle: name, inputs: Object.fromEntries(inputs) };
  writeFileSync(tmp(MANIFEST), JSON.stringify(manifest, null, 1));
  renameSync(tmp(MANIFEST), MANIFEST);
  const old = readdirSync(CACHE_DIR)
    .filter((f) => /^trainer-ctl-[0-9a-f]+\.mjs$/.test(f) && f !== name)
    .map((f) => ({ f, t: statSync(join(CACHE_DIR, f)).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  for (const { f } of old.slice(KEEP_OLD)) rmSync(join(CACHE_DIR, f), { force: true });
  return join(CACHE_DIR, name);
}

/**
 * The CLI's `run(argv)` from the bundle, building it when the sources changed; undefined when it
 * cannot be had (no writable cache, a source that does not build), for the caller to use tsx.
 */
export async function bundledCli() {
  let file = currentBundle();
  if (!file) {
    try {
      file = await build();
    } catch {
      return undefined;
    }
  }
  process.setSourceMapsEnabled(true);
  return (await import(pathToFileURL(file).href)).run;
}

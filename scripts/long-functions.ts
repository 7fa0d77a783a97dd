/**
 * Lists every function in product source longer than the limit (issue 28, acceptance 4):
 * TypeScript and JavaScript under packages/*\/src (TypeScript's parser), Python under
 * engine/thinkfl_engine (Python's `ast`, long-functions.py). Fails when one is not in the
 * allow-list, scripts/long-functions.allow, which names each with its reason.
 *   npm run check:functions            # the check
 *   npx tsx scripts/long-functions.ts --all   # every function over the limit, allowed or not
 *   npx tsx scripts/long-functions.ts --root DIR   # another tree of the same layout
 * A function's length counts its lines from its first token to its closing one, its inner
 * functions included (a closure is part of the function that holds it), its doc comment not.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const LIMIT = 80;
const here = dirname(fileURLToPath(import.meta.url));
/** The tree to check: the repository, or --root DIR (the script's test plants functions in one). */
const rootAt = process.argv.indexOf('--root');
const root = rootAt > 0 ? resolve(process.argv[rootAt + 1]) : join(here, '..');
const allowFile = join(root, 'scripts/long-functions.allow');

interface LongFunction {
  file: string;
  line: number;
  name: string;
  lines: number;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** What a reader calls the function: its own name, or the name it is bound to, qualified by its class. */
function functionName(node: ts.FunctionLikeDeclaration): string {
  const own = node.name && ts.isIdentifier(node.name) ? node.name.text : node.name?.getText();
  const parent = node.parent;
  let name = own;
  if (!name && ts.isVariableDeclaration(parent)) name = parent.name.getText();
  if (!name && ts.isPropertyAssignment(parent)) name = parent.name.getText();
  if (!name && ts.isPropertyDeclaration(parent)) name = parent.name.getText();
  if (!name && ts.isParenthesizedExpression(parent) && ts.isCallExpression(parent.parent) && parent.parent.expression === parent)
    name = '<iife>';
  if (!name && ts.isCallExpression(parent)) name = `<callback of ${parent.expression.getText().slice(0, 40)}>`;
  if (ts.isConstructorDeclaration(node)) name = 'constructor';
  name ??= '<anonymous>';
  const cls = ts.isClassLike(parent)
    ? parent
    : ts.isPropertyDeclaration(parent) && ts.isClassLike(parent.parent)
      ? parent.parent
      : undefined;
  return cls?.name ? `${cls.name.text}.${name}` : name;
}

function longTypeScriptFunctions(): LongFunction[] {
  const found: LongFunction[] = [];
  const packages = join(root, 'packages');
  for (const pkg of readdirSync(packages)) {
    const src = join(packages, pkg, 'src');
    if (!existsSync(src)) continue;
    for (const path of sourceFiles(src)) {
      const file = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
      const visit = (node: ts.Node): void => {
        if (ts.isFunctionLike(node) && 'body' in node && node.body) {
          const fn = node as ts.FunctionLikeDeclaration;
          const first = file.getLineAndCharacterOfPosition(fn.getStart(file)).line;
          const last = file.getLineAndCharacterOfPosition(fn.getEnd()).line;
          const lines = last - first + 1;
          if (lines > LIMIT) found.push({ file: relative(root, path), line: first + 1, name: functionName(fn), lines });
        }
        ts.forEachChild(node, visit);
      };
      visit(file);
    }
  }
  return found;
}

function longPythonFunctions(): LongFunction[] {
  const venv = join(here, '..', '.cache/venv/bin/python');
  const python = existsSync(venv) ? venv : 'python3';
  const out = execFileSync(python, [join(here, 'long-functions.py'), String(LIMIT), join(root, 'engine/thinkfl_engine')], {
    encoding: 'utf8',
  });
  return (JSON.parse(out) as LongFunction[]).map((f) => ({ ...f, file: relative(root, f.file) }));
}

/** The allow-list: one line per function, `path#name: reason`; # at the start of a line is a comment. */
function readAllowList(): Map<string, string> {
  const allowed = new Map<string, string>();
  if (!existsSync(allowFile)) return allowed;
  readFileSync(allowFile, 'utf8')
    .split('\n')
    .forEach((raw, i) => {
      const line = raw.trim();
      if (line === '' || line.startsWith('#')) return;
      const m = /^(\S+#[^:]+):\s*(\S.*)$/.exec(line);
      if (!m) throw new Error(`${relative(root, allowFile)}:${i + 1}: expected "path#name: reason", got "${line}"`);
      allowed.set(m[1].trim(), m[2]);
    });
  return allowed;
}

const all = process.argv.includes('--all');
const allowed = readAllowList();
const found = [...longTypeScriptFunctions(), ...longPythonFunctions()].sort((a, b) => b.lines - a.lines);
const key = (f: LongFunction) => `${f.file}#${f.name}`;
const unexplained = found.filter((f) => !allowed.has(key(f)));
for (const f of all ? found : unexplained) {
  const reason = allowed.get(key(f));
  console.log(`${f.file}:${f.line} ${f.name} ${f.lines} lines${reason ? ` (allowed: ${reason})` : ''}`);
}
const stale = [...allowed.keys()].filter((k) => !found.some((f) => key(f) === k));
for (const k of stale) console.log(`${relative(root, allowFile)}: ${k} is not over ${LIMIT} lines (or gone): drop it from the list`);
console.log(
  `${found.length} function${found.length === 1 ? '' : 's'} over ${LIMIT} lines, ${found.length - unexplained.length} allowed with a reason, ` +
    `${unexplained.length} not`,
);
if (unexplained.length > 0 || stale.length > 0) process.exit(1);

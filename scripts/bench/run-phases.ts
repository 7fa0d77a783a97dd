/**
 * Where a finished run's time went, from its run directory: SFT updates, GRPO rollouts and
 * updates (metrics.jsonl timings; the rollouts' episodes and generated tokens, so that two runs'
 * rollout seconds can be compared per unit of work), each stage's evaluation (from the stage's last metrics line to
 * its eval-<stage>.json), and, given the wall time, the rest (start-up, stage switches, shutdown).
 * The figures of docs/experiments.md's main-job rows come from it.
 *
 *   npx tsx scripts/bench/run-phases.ts --run-dir /tmp/mainjob [--wall 346.4]
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { 'run-dir': { type: 'string' }, wall: { type: 'string' } } });
const dir = values['run-dir'];
if (!dir) throw new Error('--run-dir DIR is required (a finished run directory)');

interface Line {
  kind: 'sft' | 'grpo';
  stage: string;
  at: string;
  timing: Record<string, number>;
  /** GRPO lines: episodes scored in the step, and their mean response tokens. */
  samples?: number;
  response_tokens?: number;
}
const lines = readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as Line);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const s = (ms: number) => (ms / 1000).toFixed(1);

const sft = lines.filter((l) => l.kind === 'sft').map((l) => l.timing.update_ms);
const grpo = lines.filter((l) => l.kind === 'grpo');
const rolloutMs = sum(grpo.map((l) => l.timing.rollout_ms));
const episodes = sum(grpo.map((l) => l.samples ?? 0));
const generated = Math.round(sum(grpo.map((l) => (l.samples ?? 0) * (l.response_tokens ?? 0))));
const rows: [string, number, string][] = [
  [
    'SFT updates',
    sum(sft),
    `${sft.length} updates, first ${s(sft[0] ?? 0)} s, median ${s([...sft].sort((a, b) => a - b)[sft.length >> 1] ?? 0)} s`,
  ],
  [
    'GRPO rollouts',
    rolloutMs,
    `${grpo.length} steps, ${episodes} episodes (${(rolloutMs / episodes).toFixed(0)} ms each), ${generated} generated tokens`,
  ],
  ['GRPO updates', sum(grpo.map((l) => l.timing.update_ms)), 'train and policy export'],
  ['GRPO enqueue and grading', sum(grpo.map((l) => l.timing.enqueue_ms + l.timing.grade_ms)), ''],
];
// An evaluation runs after its stage's last metrics line and ends when eval-<stage>.json is written.
const stageOf = (l: Line) => (l.kind === 'sft' ? 'sft' : l.stage);
for (const stage of [...new Set(lines.map(stageOf))]) {
  const file = join(dir, `eval-${stage}.json`);
  const last = lines.filter((l) => stageOf(l) === stage).at(-1)!;
  if (existsSync(file)) rows.push([`evaluation after ${stage}`, statSync(file).mtimeMs - Date.parse(last.at), 'and the switch to it']);
}
const wall = values.wall ? Number(values.wall) * 1000 : undefined;
if (wall) rows.push(['the rest', wall - sum(rows.map((r) => r[1])), 'start-up, stage switches, shutdown']);

console.log(`${dir}${wall ? `, wall ${s(wall)} s` : ''}`);
for (const [name, ms, note] of rows) {
  console.log(`${name.padEnd(28)} ${s(ms).padStart(7)} s${wall ? ` ${((100 * ms) / wall).toFixed(0).padStart(3)}%` : ''}  ${note}`);
}

/**
 * What each GRPO stage of finished runs did, read from their run directories: per stage the
 * samples' share of well-formed episodes, the share of groups whose samples all scored the same,
 * and the mean reward over each block of 8 steps (metrics.jsonl); then per evaluation the held-out
 * format validity, per-fault service MRR (best request / majority vote), per-request MRR, how
 * many held-out requests got the same answer with the same number of tool calls as the SFT
 * checkpoint (eval-*.json), and of the others how many moved the root cause's service up the
 * answer (towards), down or out of it (away), or left its rank as it was: whether the stages
 * changed greedy decisions at all, and for the better.
 *
 *   npx tsx scripts/stage-changes.ts RUN_DIR [RUN_DIR ...]
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { answerChanges, type AnsweredRequest } from '../packages/trainer-ctl/src/eval/answer-changes';

type Mrr = { service?: { mrr: number } };
interface EvalFile {
  format_valid: number;
  summary: { per_request: Mrr; per_fault: Mrr; per_fault_vote?: Mrr };
  requests: AnsweredRequest[];
}
interface GrpoRecord {
  kind: 'grpo';
  stage: string;
  step: number;
  zero_variance_share: number;
  format_valid: number;
  reward: { mean: number };
}

const STAGES = ['priming', 'exploration', 'refinement'];
const BLOCK = 8;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const mrr = (m: Mrr | undefined) => (m?.service ? m.service.mrr.toFixed(3) : '-');

const dirs = process.argv.slice(2);
if (!dirs.length) {
  console.error('usage: npx tsx scripts/stage-changes.ts RUN_DIR [RUN_DIR ...]');
  process.exit(2);
}

for (const dir of dirs) {
  const metricsFile = join(dir, 'metrics.jsonl');
  if (!existsSync(metricsFile)) throw new Error(`${metricsFile}: no such file (is ${dir} a run directory?)`);
  // The last record of each (stage, step): a resumed run writes a step again.
  const steps = new Map<string, GrpoRecord>();
  for (const [i, line] of readFileSync(metricsFile, 'utf8').split('\n').entries()) {
    if (!line.trim()) continue;
    let rec: { kind?: string };
    try {
      rec = JSON.parse(line) as { kind?: string };
    } catch {
      throw new Error(`${metricsFile}:${i + 1}: not JSON`);
    }
    if (rec.kind === 'grpo') steps.set(`${(rec as GrpoRecord).stage}/${(rec as GrpoRecord).step}`, rec as GrpoRecord);
  }
  console.log(`\n${dir}\n`);
  console.log(`| stage | steps | samples well formed | groups all equal | reward per ${BLOCK} steps |`);
  console.log('| --- | --- | --- | --- | --- |');
  for (const stage of STAGES) {
    const recs = [...steps.values()].filter((r) => r.stage === stage).sort((a, b) => a.step - b.step);
    if (!recs.length) continue;
    const blocks: string[] = [];
    for (let i = 0; i < recs.length; i += BLOCK) blocks.push(mean(recs.slice(i, i + BLOCK).map((r) => r.reward.mean)).toFixed(3));
    const fmt = mean(recs.map((r) => r.format_valid)).toFixed(2);
    const equal = mean(recs.map((r) => r.zero_variance_share)).toFixed(2);
    console.log(`| ${stage} | ${recs.length} | ${fmt} | ${equal} | ${blocks.join(', ')} |`);
  }
  const sftFile = join(dir, 'eval-sft.json');
  const sft = existsSync(sftFile) ? (JSON.parse(readFileSync(sftFile, 'utf8')) as EvalFile) : undefined;
  console.log(
    '\n| eval | validity | per-fault MRR | vote | per request | same as SFT | changed towards the root cause | away | same rank |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const name of ['sft', ...STAGES]) {
    const file = join(dir, `eval-${name}.json`);
    if (!existsSync(file)) continue;
    const e = JSON.parse(readFileSync(file, 'utf8')) as EvalFile;
    const c = sft ? answerChanges(sft.requests, e.requests) : undefined;
    const vs = c ? `${c.same} of ${c.compared} | ${c.towards} | ${c.away} | ${c.sameRank}` : '- | - | - | -';
    console.log(
      `| ${name} | ${e.format_valid.toFixed(2)} | ${mrr(e.summary.per_fault)} | ${mrr(e.summary.per_fault_vote)} | ${mrr(e.summary.per_request)} | ${vs} |`,
    );
  }
}

/**
 * What each GRPO stage of finished runs did, read from their run directories: per stage the
 * samples' share of well-formed episodes, the share of groups whose samples all scored the same,
 * and the mean reward over each block of 8 steps (metrics.jsonl); then per evaluation the held-out
 * format validity, per-fault service MRR (best request / majority vote), per-request MRR, and how
 * many held-out requests got the same answer with the same number of tool calls as the SFT
 * checkpoint (eval-*.json): whether the stages changed any greedy decision at all.
 *
 *   npx tsx scripts/stage-changes.ts RUN_DIR [RUN_DIR ...]
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

type Mrr = { service?: { mrr: number } };
interface EvalRequest {
  caseId: string;
  answer: unknown;
  toolCalls: number;
}
interface EvalFile {
  formatValid: number;
  summary: { perRequest: Mrr; perFault: Mrr; perFaultVote?: Mrr };
  requests: EvalRequest[];
}
interface GrpoRecord {
  kind: 'grpo';
  stage: string;
  step: number;
  zeroVarianceShare: number;
  formatValid: number;
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
    const fmt = mean(recs.map((r) => r.formatValid)).toFixed(2);
    const equal = mean(recs.map((r) => r.zeroVarianceShare)).toFixed(2);
    console.log(`| ${stage} | ${recs.length} | ${fmt} | ${equal} | ${blocks.join(', ')} |`);
  }
  const sftFile = join(dir, 'eval-sft.json');
  const sft = existsSync(sftFile) ? (JSON.parse(readFileSync(sftFile, 'utf8')) as EvalFile) : undefined;
  const sftBy = new Map(sft?.requests.map((r) => [r.caseId, r]));
  console.log('\n| eval | validity | per-fault MRR | vote | per request | same as SFT |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const name of ['sft', ...STAGES]) {
    const file = join(dir, `eval-${name}.json`);
    if (!existsSync(file)) continue;
    const e = JSON.parse(readFileSync(file, 'utf8')) as EvalFile;
    const same = e.requests.filter((r) => {
      const s = sftBy.get(r.caseId);
      return s && s.toolCalls === r.toolCalls && JSON.stringify(s.answer) === JSON.stringify(r.answer);
    }).length;
    const vs = sft ? `${same} of ${e.requests.length}` : '-';
    console.log(`| ${name} | ${e.formatValid.toFixed(2)} | ${mrr(e.summary.perFault)} | ${mrr(e.summary.perFaultVote)} | ${mrr(e.summary.perRequest)} | ${vs} |`);
  }
}

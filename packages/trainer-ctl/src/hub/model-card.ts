/** README.md of a pushed checkpoint: what it is and the run's evaluation table (one row per eval-*.json of the run directory). */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Summary {
  n: number;
  recall: Record<string, number>;
  mrr: number;
}

interface EvalFile {
  name: string;
  policy_version: number;
  cases: number;
  format_valid: number;
  answered: number;
  summary: { levels: string[]; per_request: Record<string, Summary> };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}`;

/** The table rows in Markdown: evaluation, policy version, cases, then per level AC@1, AC@3, MRR. */
export function evaluationTable(runDir: string): string {
  const files = existsSync(runDir)
    ? readdirSync(runDir)
        .filter((f) => /^eval-.+\.json$/.test(f))
        .sort()
    : [];
  if (!files.length) return '_No evaluation was recorded in this run._';
  const reports = files.map((f) => JSON.parse(readFileSync(join(runDir, f), 'utf8')) as EvalFile);
  const levels = [...new Set(reports.flatMap((r) => r.summary.levels))];
  const head = [
    'evaluation',
    'policy version',
    'cases',
    'format valid %',
    'answered %',
    ...levels.flatMap((l) => [`${l} AC@1 %`, `${l} AC@3 %`, `${l} MRR`]),
  ];
  const rows = reports.map((r) => [
    r.name,
    String(r.policy_version),
    String(r.cases),
    pct(r.format_valid),
    pct(r.answered),
    ...levels.flatMap((l) => {
      const s = r.summary.per_request[l];
      return s ? [pct(s.recall['1'] ?? 0), pct(s.recall['3'] ?? 0), s.mrr.toFixed(3)] : ['', '', ''];
    }),
  ]);
  return [head, head.map(() => '---'), ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

/** `library` is what loads the files: peft for a LoRA adapter (on base_model), transformers for a full model. */
export function modelCard(opts: {
  repo: string;
  runDir: string;
  source: string;
  library: 'peft' | 'transformers';
  baseModel?: string;
}): string {
  return `---
library_name: ${opts.library}
tags: [thinkfl, grpo, root-cause-analysis${opts.library === 'peft' ? ', lora' : ''}]
${opts.baseModel ? `base_model: ${opts.baseModel}\n` : ''}---

# ${opts.repo}

A failure-localization agent fine-tuned with staged GRPO (the ThinkFL recipe) by thinkfl's
trainer-ctl${opts.library === 'peft' ? `: a LoRA adapter${opts.baseModel ? ` on ${opts.baseModel}` : ''}` : ''}. Files: \`${opts.source}\` of the run.

## Evaluation

${evaluationTable(opts.runDir)}
`;
}

/**
 * trainer-ctl report RUN_DIR: one self-contained HTML file (opens offline) with the run's
 * per-step curves, each stage's held-out evaluation against the scripted baselines on the same
 * cases, and a transcript browser.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CommandModule } from 'yargs';
import { gatherReport } from '../report/data';
import { reportHtml } from '../report/html';
import { RUN_DIR_POSITIONAL } from '../cli-options';

interface ReportArgs {
  'run-dir': string;
  out?: string;
  baselines: boolean;
}

export const command: CommandModule<object, ReportArgs> = {
  command: 'report <run-dir>',
  describe: 'write a run report: one offline HTML file with curves, evaluations against baselines and transcripts',
  builder: (y) =>
    y
      .positional('run-dir', RUN_DIR_POSITIONAL)
      .option('out', { type: 'string', describe: 'HTML file to write (default RUN_DIR/report.html)' })
      .option('baselines', {
        type: 'boolean',
        default: true,
        describe: "play the scripted baselines on each evaluation's cases (--no-baselines skips them)",
      }),
  handler: async (args) => {
    const runDir = resolve(args['run-dir']);
    const data = await gatherReport(runDir, { baselines: args.baselines });
    const out = resolve(args.out ?? join(runDir, 'report.html'));
    writeFileSync(out, reportHtml(data));
    console.log(
      `report: ${out} (${Object.keys(data.series).length} series, ${data.evals.length} evaluations, ${data.episodes.length} episodes)`,
    );
  },
};

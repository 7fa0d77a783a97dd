/** The CI gate at the end of a run: check run.expect, write junit.xml, fail naming each failed expectation. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunConfig } from '../config/index';
import { checkExpectations, currentExpectations, formatVerdicts, type Verdict } from './expectations';
import { JUNIT_FILE, junitXml } from './junit';
import { runSeries } from './series';

export class ExpectationsFailed extends Error {
  override name = 'ExpectationsFailed';
  constructor(
    readonly verdicts: Verdict[],
    readonly junitFile: string,
  ) {
    const failed = verdicts.filter((v) => !v.ok);
    super(
      `run.expect: ${failed.length} of ${verdicts.length} expectations failed: ${failed.map((v) => `${v.name} (${v.detail})`).join('; ')}; report ${junitFile}`,
    );
  }
}

/** Checks the run's expectations (none: nothing to do); throws ExpectationsFailed when any fails. */
export function gateRun(runDir: string, config: RunConfig, print: (text: string) => void): Verdict[] {
  if (!config.run.expect.length) return [];
  const { expectations, warnings } = currentExpectations(config.run.expect);
  for (const w of warnings) print(w);
  const verdicts = checkExpectations(expectations, runSeries(runDir));
  const file = join(runDir, JUNIT_FILE);
  writeFileSync(file, junitXml(config.run.name, verdicts));
  print(formatVerdicts(verdicts));
  if (verdicts.some((v) => !v.ok)) throw new ExpectationsFailed(verdicts, file);
  print(`run.expect: all ${verdicts.length} expectations met; report ${file}`);
  return verdicts;
}

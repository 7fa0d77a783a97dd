/**
 * The text a model reads, pinned: every scripted agent (each on its own protocol) played on a
 * few real Nezha cases, with the tools' default settings and with span aliases, pod aliases and
 * verdicts on, every message of each episode written out. packages/env/test/transcripts.test.ts
 * compares the current code's messages with the file, so that a change to the stored dataset
 * types (issue 28: snake_case) cannot change a token the models were trained on unseen.
 *
 *   npx tsx scripts/transcripts.ts --out packages/env/test/transcripts.json
 */
import { writeFileSync } from 'node:fs';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { loadDataset } from '../packages/env/src/datasets/index';
import { type Transcript, transcripts } from '../testkit/transcripts';
import { ensureNezhaDataset } from '../testkit/nezha';

const argv = await yargs(hideBin(process.argv))
  .scriptName('transcripts')
  .strict()
  .option('out', { type: 'string', demandOption: true, describe: 'JSON file to write' })
  .parse();

const ds = await loadDataset(await ensureNezhaDataset());
const all: Transcript[] = await transcripts(ds);
writeFileSync(argv.out, `${JSON.stringify({ command: 'npx tsx scripts/transcripts.ts --out FILE', transcripts: all }, null, 1)}\n`);
console.log(`${all.length} episodes, ${all.reduce((n, t) => n + t.messages.length, 0)} messages -> ${argv.out}`);

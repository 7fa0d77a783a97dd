/**
 * The SFT schedule a run config gets, computed as a run computes it without training: the
 * teacher conversations kept (controller/teacher.ts: the expert's correct ones on the run's
 * training cases, up to stages.priming.sft.conversations), the optimizer steps of sftPlan
 * (epochs x ceil(conversations / batch_size)) and the SFT updates, one train job per
 * steps_per_update steps (controller/sft-phase.ts). Needs the config's dataset, not its model.
 *
 *   npx tsx scripts/sft-plan.ts CONFIG... [--seed N]...
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { loadDataset } from '@thinkfl/env';
import { loadRunConfig } from '../packages/trainer-ctl/src/config/index';
import { runCases } from '../packages/trainer-ctl/src/controller/cases';
import { sftUpdates } from '../packages/trainer-ctl/src/controller/sft-phase';
import { teacherConversations } from '../packages/trainer-ctl/src/controller/teacher';

const argv = await yargs(hideBin(process.argv))
  .scriptName('sft-plan')
  .strict()
  .usage('$0 CONFIG... [--seed N]...')
  .option('seed', { type: 'number', array: true, describe: "run.seed values to compute it for (default: the config's own)" })
  .demandCommand(1)
  .parse();

for (const file of argv._.map(String)) {
  const { config } = loadRunConfig(file, { checkPaths: false });
  const dataset = await loadDataset(config.dataset.path);
  for (const seed of argv.seed ?? [config.run.seed]) {
    const seeded = { ...config, run: { ...config.run, seed } };
    const sft = seeded.stages.priming.sft;
    const kept = sft.enabled ? (await teacherConversations(seeded, dataset, runCases(dataset, seeded).train)).length : 0;
    const updates = sftUpdates(kept, seeded);
    const steps = updates.reduce((a, u) => a + u.length, 0);
    console.log(
      `${file} seed ${seed}: ${kept} teacher conversations (of ${sft.conversations} wanted), ${sft.epochs} epochs at batch ${sft.batch_size}: ` +
        `${steps} SFT steps in ${updates.length} updates of up to ${sft.steps_per_update}`,
    );
  }
}

/**
 * trainer-ctl: every sub-command is one file in ./commands exporting `command`, a yargs
 * CommandModule; adding a command is adding a file.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import yargs, { type CommandModule } from 'yargs';
import { hideBin } from 'yargs/helpers';

async function loadCommands(): Promise<CommandModule[]> {
  const dir = join(import.meta.dirname, 'commands');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .sort();
  // A template literal relative to this file: a bundler (bin/cli-bundle.mjs) takes in every file of the folder.
  const mods = await Promise.all(files.map((f) => import(`./commands/${f}`)));
  return mods.map((m, i) => {
    if (!m.command) throw new Error(`commands/${files[i]} exports no 'command'`);
    return m.command as CommandModule;
  });
}

export async function main(argv: string[]): Promise<void> {
  let cli = yargs(argv.length ? argv : hideBin(process.argv))
    .scriptName('trainer-ctl')
    .strict()
    .demandCommand(1, 'name a command (see --help)')
    .recommendCommands()
    .help()
    .fail((msg, err, y) => {
      if (err) {
        process.stderr.write(`trainer-ctl: ${err.message}\n`);
      } else {
        process.stderr.write(`${y.help()}\n\ntrainer-ctl: ${msg}\n`);
      }
      process.exit(2);
    });
  for (const c of await loadCommands()) cli = cli.command(c);
  await cli.parseAsync();
}

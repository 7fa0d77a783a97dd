import type { CommandModule } from 'yargs';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const command: CommandModule = {
  command: 'version',
  describe: 'print the trainer-ctl version',
  handler: () => {
    const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'));
    console.log(pkg.version);
  },
};

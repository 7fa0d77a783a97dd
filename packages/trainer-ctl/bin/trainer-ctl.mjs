#!/usr/bin/env node
// Runs the TypeScript CLI: bundled from the sources and cached (cli-bundle.mjs), or through tsx's
// loader where no bundle can be had. The project ships sources, not a build.
import { bundledCli } from './cli-bundle.mjs';

const main = await bundledCli();
if (main) {
  await main(process.argv.slice(2));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  const cli = await import('../src/cli.ts');
  await cli.main(process.argv.slice(2));
}

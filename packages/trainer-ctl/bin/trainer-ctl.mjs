#!/usr/bin/env node
// Runs the TypeScript CLI through tsx's loader: the project ships sources, not a build.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
await main(process.argv.slice(2));

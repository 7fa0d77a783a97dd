import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'scripts/**/*.test.ts'],
    globalSetup: ['testkit/global-setup.ts'],
    pool: 'forks',
    // Two test files at a time, also on 2 cores (vitest's default there is one): most files wait on
    // child processes (a run's controller, workers, engine, Redis) more than they compute.
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 600_000,
    // The JSON report is what .ci/run reads for its "N passed, N failed" line.
    reporters: ['default', 'json'],
    outputFile: { json: '.cache/vitest-report.json' },
  },
});

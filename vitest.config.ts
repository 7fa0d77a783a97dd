import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'scripts/**/*.test.ts'],
    globalSetup: ['testkit/global-setup.ts'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 600_000,
    // The JSON report is what .ci/run reads for its "N passed, N failed" line.
    reporters: ['default', 'json'],
    outputFile: { json: '.cache/vitest-report.json' },
  },
});

import { defineConfig } from 'vitest/config';

// Two cores on the CI machine: keep forks few so integration tests that spawn
// svcd and MCP servers do not starve each other.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
    pool: 'forks',
    maxWorkers: 2,
    // Generous: CLI tests spawn a dozen `svc` processes each, and a loaded 2-core machine
    // (another build, a benchmark) triples their time. A test that hangs still fails.
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});

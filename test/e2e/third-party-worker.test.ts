/**
 * A worker written from the documentation alone, in another language (svc-worker(1), A WORKER OF
 * YOUR OWN; svcd(8) ENDPOINTS; svc-gateway(5) CALLS; I 2.6, 3, 4.1, 4.2; D §5.4, §6, §7):
 * test/e2e/third-party-worker.py, Python with its standard library only, starts the built svcd,
 * uses the built svc CLI to sign a bundle, push a policy, mint a remit, start a run and approve,
 * and plays the worker over HTTP: leases (one without wait_seconds, answered at once), heartbeats,
 * tool steps through the gateway, a retryable failure reported without `deterministic` and
 * `usage` (their documented defaults), an action parked for approval and allowed as
 * `approved:<id>` once approved, completions without `usage`, the event log read in pages, and
 * replay. Every check it makes is a line of its output; the test fails on any that failed.
 * Skipped, saying why, where python3 is not installed.
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, tempDir } from '../helpers/daemon.js';

const python = spawnSync('python3', ['--version'], { encoding: 'utf8' });
const havePython = python.status === 0;
const reason = havePython ? '' : `python3 is not installed (${python.error?.message ?? python.stderr.trim()}): the third-party worker is not run`;
if (!havePython) console.warn(`skipped: ${reason}`);

describe('a third-party worker written from the docs (svc-worker(1), A WORKER OF YOUR OWN)', () => {
  it.skipIf(!havePython)('runs a bundle end to end over the documented HTTP APIs: lease, heartbeat, gateway calls, retry, approval, events, replay', () => {
    const work = tempDir('svc-thirdparty-');
    try {
      const out = spawnSync('python3', [join(ROOT, 'test/e2e/third-party-worker.py'), ROOT, work], {
        encoding: 'utf8',
        env: { ...process.env, NODE: process.execPath, SVC_TOKEN: '', SVC_KERNEL_URL: '', SVC_GATEWAY_URL: '', PYTHONDONTWRITEBYTECODE: '1' },
        timeout: 55_000,
      });
      const lines = out.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
      const failed = lines.filter((l) => l.check !== undefined && l.ok !== true);
      const last = lines.at(-1);
      expect(failed, out.stderr).toEqual([]);
      expect(last?.result, `${out.stdout.slice(-2000)}\n${out.stderr}`).toMatchObject({ failed: [] });
      expect(lines.filter((l) => l.check !== undefined).length).toBeGreaterThanOrEqual(38);
      expect(out.status).toBe(0);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 60_000);
});

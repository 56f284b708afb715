/**
 * What the operating-system limits sweep found (svcd(8), LIMITS): a request must arrive
 * within REQUEST_TIMEOUT_MS (fastify turned Node's bound off, so a body trickled a byte at a
 * time held its connection and descriptor for good), and the body check of decisions §10
 * walks a large body in linear time and little memory (an 8 MiB body of small objects took
 * seconds of the event loop, during which no other request, health or heartbeat, was served).
 */
import { readdirSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { join } from 'node:path';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { installCommon, renderKernelError } from '../../daemon/http/common.js';
import { fastifyOptions, REQUEST_TIMEOUT_MS } from '../../daemon/http/fastify-options.js';
import { bodyProblem } from '../../src/encoding/json-limits.js';
import { loadGatewayConfig } from '../../src/gateway/config.js';
import { Redactor, silentLogger } from '../../src/log/logger.js';
import { spawnSvcd, startTestDaemon, tempDir } from '../helpers/daemon.js';
import { RUN_PAGE_BYTES } from '../../src/kernel/run-engine.js';
import { pushBundle, startRun, startRunDaemon } from './run-fixtures.js';

describe('svcd(8) LIMITS: the time to send a request is bounded', () => {
  it('both listeners bound the time to receive a whole request; headers keep their own, shorter bound', async () => {
    const dir = tempDir('svc-limits-');
    const config = loadGatewayConfig({ data_dir: join(dir, 'gw') }, { env: {}, redactor: new Redactor() });
    await using d = await startTestDaemon({ gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
    expect(d.apps).toHaveLength(2);
    for (const app of d.apps) {
      expect(app.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
      expect(app.server.headersTimeout).toBeGreaterThan(0);
      expect(app.server.headersTimeout).toBeLessThanOrEqual(REQUEST_TIMEOUT_MS);
    }
    // Longer than a long poll (30 s) and a connector's default timeout_ms: the bound is on
    // receiving the request, but a margin keeps it from ever being mistaken for one on them.
    expect(REQUEST_TIMEOUT_MS).toBeGreaterThanOrEqual(60_000);
    rmSync(dir, { recursive: true, force: true });
  });

  it('a body sent a byte at a time is cut off with a 400 request_invalid envelope once the bound passes (D §10)', async () => {
    const app = Fastify(fastifyOptions());
    installCommon(app, { token: null, render: renderKernelError, logger: silentLogger });
    app.post('/v1/echo', async (req) => req.body);
    // The bound as configured, shortened so the test does not wait two minutes, and checked
    // often (Node looks every 30 s by default).
    app.server.requestTimeout = 800;
    app.server.headersTimeout = 800;
    (app.server as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval = 100;
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as AddressInfo;
      const started = Date.now();
      const answer = await new Promise<string>((resolve, reject) => {
        const s = connect(port, '127.0.0.1');
        let got = '';
        s.on('connect', () => s.write('POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{'));
        const drip = setInterval(() => s.writable && s.write(' '), 100);
        s.on('data', (c) => (got += c));
        s.on('close', () => {
          clearInterval(drip);
          resolve(got);
        });
        s.on('error', reject);
        setTimeout(() => s.destroy(new Error('never cut off')), 10_000);
      });
      expect(Date.now() - started).toBeLessThan(5000);
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
      expect(body).toEqual({ error: { code: 'request_invalid', message: 'the request was not received in time', details: { path: '' } } });
    } finally {
      await app.close();
    }
  });
});

describe('D §10: the body check scales with the body', () => {
  it('walks a body of a million small values in well under a second (it took seconds, starving every other request)', () => {
    // The shape of an 8 MiB bundle of small steps: 700,000 objects of one member each.
    const n = 700_000;
    const body = { bundle: { name: 'x', steps: Array.from({ length: n }, (_, i) => ({ a: i % 10 })) }, signature: null };
    const started = performance.now();
    expect(bodyProblem(body)).toBeNull();
    const ms = performance.now() - started;
    // About 0.1 s here; it was 5 s. Generous for a busy machine, far below the old cost.
    expect(ms).toBeLessThan(2000);
    // The first problem is still found, named by its pointer, in document order.
    body.bundle.steps[n - 1] = { a: Infinity };
    body.bundle.steps[n - 2] = { a: -Infinity };
    expect(bodyProblem(body)?.path).toBe(`/bundle/steps/${n - 2}/a`);
  });
});

describe('svcd(8) GET /runs: a page is bounded in bytes as well as in runs (D §6 cursors)', () => {
  it('stops a page of large run states at RUN_PAGE_BYTES, with next set, and the pages together list every run once, newest first', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const ticket = 'x'.repeat(900_000); // each run state carries its input: about 0.9 MB
    const started: string[] = [];
    for (let i = 0; i < 12; i++) started.push((await startRun(d, bundleId, { input: { invoice_id: `inv-${i}`, ticket } })).run_id);
    const first = await d.kernel_('/runs?limit=50');
    expect(first.status).toBe(200);
    expect(first.body.runs.length).toBeGreaterThan(0);
    expect(first.body.runs.length).toBeLessThan(12);
    expect(JSON.stringify(first.body).length).toBeLessThan(RUN_PAGE_BYTES + 1024 * 1024);
    expect(first.body.next).toEqual(expect.any(String));
    const seen: string[] = first.body.runs.map((r: any) => r.run_id);
    let next: string | null = first.body.next;
    while (next !== null) {
      const page = await d.kernel_(`/runs?limit=50&after=${encodeURIComponent(next)}`);
      expect(page.status).toBe(200);
      expect(page.body.runs.length).toBeGreaterThan(0);
      seen.push(...page.body.runs.map((r: any) => r.run_id));
      next = page.body.next;
    }
    expect(seen).toEqual([...started].reverse());
    // Small runs are not affected: the limit alone cuts the page.
    const two = await d.kernel_('/runs?limit=2');
    expect(two.body.runs.map((r: any) => r.run_id)).toEqual([started[11], started[10]]);
    expect(two.body.next).toEqual(expect.any(String));
  });
});

describe('svcd(8) LIMITS: open descriptors are watched (process_open_fds, process_max_fds)', () => {
  it('logs a warning near the limit and again once back under it, and shows both counts in /metrics', async () => {
    const dir = tempDir('svc-fds-');
    await using svcd = await spawnSvcd(['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { SVC_TOKEN: '' });
    const pid = svcd.child.pid!;
    const openNow = () => readdirSync(`/proc/${pid}/fd`).length;
    // A limit 120 above what svcd holds now: room for what it opens on its own meanwhile
    // (the WAL, a checkpoint, the watch's own read), and 90 % reached with about 100 more.
    const max = openNow() + 120;
    execFileSync('prlimit', ['--pid', String(pid), `--nofile=${max}:${max}`]);
    const { port } = new URL(svcd.kernelUrl!);
    const sockets: Socket[] = [];
    const until = async (what: string, test: () => boolean) => {
      for (const end = Date.now() + 15_000; !test(); await new Promise((r) => setTimeout(r, 100))) {
        if (Date.now() > end) throw new Error(`never ${what}; svcd logged:\n${svcd.stderr()}`);
      }
    };
    try {
      while (openNow() < Math.ceil(max * 0.9) + 1) {
        const s = connect(Number(port), '127.0.0.1');
        sockets.push(s);
        await new Promise((r) => s.once('connect', r));
        await new Promise((r) => setTimeout(r, 20)); // svcd accepts it
      }
      expect(openNow()).toBeLessThan(max);
      await until('warned', () => svcd.stderr().includes('open file descriptors near the limit'));
      const warning = JSON.parse(svcd.stderr().split('\n').find((l) => l.includes('near the limit'))!);
      expect(warning).toMatchObject({ level: 'warn', max, open: expect.any(Number) });
      expect(warning.open).toBeGreaterThanOrEqual(max * 0.9);
      // Read over a connection already open: a new one is what the limit refuses first.
      const metrics = await new Promise<string>((resolve, reject) => {
        const s = sockets[0]!;
        let got = '';
        s.on('data', (c) => {
          got += c;
          if (/process_open_fds \d+\n/.test(got) && /process_max_fds \d+\n/.test(got)) resolve(got);
        });
        s.on('error', reject);
        s.write('GET /v1/metrics HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      expect(metrics).toMatch(new RegExp(`\\nprocess_max_fds ${max}\\n`));
      expect(Number(/\nprocess_open_fds (\d+)\n/.exec(metrics)![1])).toBeGreaterThanOrEqual(max * 0.9);
    } finally {
      for (const s of sockets) s.destroy();
    }
    await until('cleared', () => svcd.stderr().includes('open file descriptors back under 80 % of the limit'));
    expect(svcd.stderr().split('\n').filter((l) => l.includes('near the limit'))).toHaveLength(1);
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
});

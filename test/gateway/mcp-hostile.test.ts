/**
 * The mcp connector against a server that breaks the stdio framing (decisions §9: stderr is
 * always drained; §10: no upstream behaviour yields a 500 or brings svcd down). The server is
 * fixtures/gateway/hostile-mcp.mjs, raw JSON-RPC, so it can write what the SDK never would.
 * LineSplitter, the framing both streams go through, is tested on its own first.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_TOOLS, McpConnector } from '../../src/gateway/connectors/mcp.js';
import { GroupStdioTransport, LineSplitter, PIPE_DRAIN_MS } from '../../src/gateway/connectors/mcp-transport.js';
import { UpstreamError } from '../../src/gateway/connectors/types.js';
import { isAlive, ROOT, tempDir } from '../helpers/daemon.js';
import { Redactor } from '../../src/log/logger.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { capturedLogger, startGateway, type TestGateway } from './helpers.js';

describe('LineSplitter', () => {
  const split = (max: number) => {
    const lines: string[] = [];
    let overflows = 0;
    const s = new LineSplitter(max, (l) => lines.push(l), () => overflows++);
    return { s, lines, overflows: () => overflows };
  };

  it('yields each line once, across chunk boundaries, without its \\r', () => {
    const { s, lines } = split(100);
    for (const chunk of ['a', 'b\r\ncd\n', '', 'e', 'f\ng\n\n']) s.push(Buffer.from(chunk));
    expect(lines).toEqual(['ab', 'cd', 'ef', 'g', '']);
    s.push(Buffer.from('tail\r'));
    s.end();
    expect(lines).toEqual(['ab', 'cd', 'ef', 'g', '', 'tail']);
  });

  it('keeps a UTF-8 character split between chunks whole', () => {
    const { s, lines } = split(100);
    const bytes = Buffer.from('é!\n');
    s.push(bytes.subarray(0, 1));
    s.push(bytes.subarray(1));
    expect(lines).toEqual(['é!']);
  });

  it('a line over the bound is reported once and dropped up to its newline; the next line is whole', () => {
    const { s, lines, overflows } = split(10);
    s.push(Buffer.from('0123456789'));
    s.push(Buffer.from('abc'));
    s.push(Buffer.from('def'));
    s.push(Buffer.from('ghi\nnext\n'));
    expect(overflows()).toBe(1);
    expect(lines).toEqual(['next']);
    s.push(Buffer.from('x'.repeat(11) + '\nok\n'));
    expect(overflows()).toBe(2);
    expect(lines).toEqual(['next', 'ok']);
  });

  it('a peer that never ends its line costs linear time (no concatenation per chunk)', () => {
    const { s, overflows } = split(64 << 20);
    const chunk = Buffer.alloc(64 << 10, 0x78);
    const t0 = performance.now();
    for (let i = 0; i < 512; i++) s.push(chunk); // 32 MiB in 64 KiB chunks
    expect(overflows()).toBe(0);
    // Concatenating on every chunk copies ~8 GiB here; linear takes a few ms.
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});

describe('a server that breaks the framing', () => {
  const log = capturedLogger(new Redactor());
  let mcp: McpConnector;
  const ctx = () => ({ signal: AbortSignal.timeout(10_000), outcomeUnknown: () => {} }) as never;

  beforeAll(async () => {
    mcp = new McpConnector(
      { name: 'hostile', type: 'mcp', command: [process.execPath, join(ROOT, 'fixtures/gateway/hostile-mcp.mjs')], env: {}, tools: {}, timeout_ms: 4000 } as never,
      { logger: log.logger, initialBackoffMs: 100, maxBackoffMs: 400 },
    );
    await mcp.start();
    expect(mcp.state).toBe('ready');
  }, 20_000);

  afterAll(async () => {
    await mcp?.close();
  });

  it('a non-JSON stdout line is skipped and logged; the answer after it in the same write arrives', async () => {
    const t0 = Date.now();
    expect(await mcp.call('noise', {}, ctx())).toEqual({ content: [{ type: 'text', text: 'after noise' }] });
    expect(Date.now() - t0).toBeLessThan(3500); // under the call's timeout (4 s): not waited out
    expect(log.text()).toContain('not a JSON-RPC message on stdout; skipped');
    expect(log.text()).not.toContain('starting work');
    expect(await mcp.call('ok', {}, ctx())).toEqual({ content: [{ type: 'text', text: 'ok' }] });
  });

  it('stderr without a newline (64 MiB) is drained and dropped with a note, not buffered', async () => {
    const before = process.memoryUsage().rss;
    expect(await mcp.call('stderr_mb', { mb: 64 }, { signal: AbortSignal.timeout(20_000) } as never)).toEqual({ content: [{ type: 'text', text: 'after stderr' }] });
    // stderr is another pipe: its data may be read after the answer on stdout.
    const deadline = Date.now() + 10_000;
    while (!log.text().includes('(a stderr line over 8192 bytes, dropped)') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(log.text()).toContain('(a stderr line over 8192 bytes, dropped)');
    expect(process.memoryUsage().rss - before).toBeLessThan(48 << 20);
  }, 30_000);

  it('a stdout line over 10 MiB is dropped as it streams in: its call times out, the server and other calls go on', async () => {
    const pid = mcp.pid;
    const err = await mcp.call('endless', {}, ctx()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError); // at the call's timeout (4 s): its answer never came
    expect(log.text()).toContain('stdout line over 10485760 bytes; dropped');
    expect(mcp.pid).toBe(pid);
    expect(await mcp.call('ok', {}, ctx())).toEqual({ content: [{ type: 'text', text: 'ok' }] });
  }, 20_000);

  it('requests from the server (sampling, elicitation, roots) are refused at once, -32601: a call waiting on them does not hang (svc-gateway(5) mcp)', async () => {
    const t0 = Date.now();
    expect(await mcp.call('ask_client', {}, ctx())).toEqual({ content: [{ type: 'text', text: '-32601 -32601 -32601' }] });
    expect(Date.now() - t0).toBeLessThan(3500); // under the call's timeout (4 s): not waited out
  });

  it('a last stderr line without its newline (a crash message) is logged when the server exits', async () => {
    await mcp.call('crash', {}, ctx()).catch(() => undefined);
    const deadline = Date.now() + 5000;
    while (!log.text().includes('fatal: boom') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(log.text()).toContain('fatal: boom');
  }, 20_000);
});

describe('a server that closes its stdout or stdin and runs on (D §9: a dead server is restarted)', () => {
  for (const stream of ['stdout', 'stdin']) {
    it(`closed ${stream}: it is ended and restarted, not left "ready" with every call waiting out its timeout`, async () => {
      const log = capturedLogger(new Redactor());
      const c = new McpConnector(
        { name: 'deaf', type: 'mcp', command: [process.execPath, join(ROOT, 'fixtures/gateway/hostile-mcp.mjs')], env: {}, tools: {}, timeout_ms: 15_000 } as never,
        { logger: log.logger, initialBackoffMs: 100, maxBackoffMs: 400 },
      );
      const ctx = () => ({ signal: AbortSignal.timeout(15_000), outcomeUnknown: () => {} }) as never;
      try {
        await c.start();
        const [pid, generation] = [c.pid!, c.generation];
        expect(await c.call(`close_${stream}`, {}, ctx())).toEqual({ content: [{ type: 'text', text: 'closing' }] });
        // A call meanwhile fails when the server is ended, far before its 15 s timeout.
        const t0 = Date.now();
        await expect(c.call('ok', {}, ctx())).rejects.toBeInstanceOf(UpstreamError);
        expect(Date.now() - t0).toBeLessThan(10_000);
        const deadline = Date.now() + 10_000;
        while (!(c.state === 'ready' && c.generation > generation) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        expect(c.generation).toBeGreaterThan(generation);
        expect(isAlive(pid)).toBe(false);
        expect(log.text()).toContain(`MCP server closed its ${stream} and did not exit; ending it`);
        expect(await c.call('ok', {}, ctx())).toEqual({ content: [{ type: 'text', text: 'ok' }] });
      } finally {
        await c.close();
      }
    }, 45_000);
  }
});

describe('through the gateway: an error result too deep to keep (decisions §10: never a 500)', () => {
  const signer = testSigner();
  let gw: TestGateway;
  const token = () => mintToken(signer, remitPayload(signer, { tools: ['hostile.*'], scopes: ['mcp:hostile:*'], autonomy: 'autonomous' }));

  beforeAll(async () => {
    gw = await startGateway({
      keys: signer,
      doc: { connectors: [{ name: 'hostile', type: 'mcp', command: [process.execPath, join(ROOT, 'fixtures/gateway/hostile-mcp.mjs')] }] },
    });
  }, 20_000);

  afterAll(async () => {
    await gw?.close();
  });

  for (const tool of ['hostile.deep_error', 'hostile.deep_error_write']) {
    it(`${tool}: 422 deterministic_failure with the details dropped, stored under its key and replayed`, async () => {
      const call = () => gw.call({ remit_token: token(), tool, args: { n: 100_000 }, idempotency_key: `deep-${tool}` });
      const first = await call();
      expect(first.status).toBe(422);
      expect(first.body.error).toMatchObject({ code: 'deterministic_failure', details: { details_dropped: expect.stringContaining('nested deeper than 256') } });
      // The key holds the outcome: not stuck in flight, not run again.
      const again = await call();
      expect(again.status).toBe(422);
      expect(again.body).toMatchObject({ replayed: true, error: { code: 'deterministic_failure' } });
    });
  }
});

describe('a write the server never answered (decisions §9: never a second execution)', () => {
  const signer = testSigner();
  let gw: TestGateway;
  const counted = join(tempDir('svc-mcp-count-'), 'writes.txt');
  const writes = (name: string) => (existsSync(counted) ? readFileSync(counted, 'utf8').split('\n').filter((l) => l === name).length : 0);
  const token = () => mintToken(signer, remitPayload(signer, { tools: ['hostile.*'], scopes: ['mcp:hostile:*'], autonomy: 'autonomous' }));

  beforeAll(async () => {
    gw = await startGateway({
      keys: signer,
      env: { HOSTILE_COUNT_FILE: counted },
      // Its tools come in two pages: results are checked for the tools of both.
      doc: { connectors: [{ name: 'hostile', type: 'mcp', command: [process.execPath, join(ROOT, 'fixtures/gateway/hostile-mcp.mjs')], env: { HOSTILE_COUNT_FILE: '${HOSTILE_COUNT_FILE}', HOSTILE_PAGED: '1' }, timeout_ms: 500 }] },
    });
  }, 20_000);

  afterAll(async () => {
    await gw?.close();
  });

  it('given up at its timeout: 502 with outcome unknown, and a repeat of its key is 409, not a second write', async () => {
    const call = () => gw.call({ remit_token: token(), tool: 'hostile.slow_write', args: { ms: 1500 }, idempotency_key: 'slow-1' });
    const first = await call();
    expect(first.status).toBe(502);
    expect(first.body.error).toMatchObject({ code: 'upstream_error', details: { outcome: 'unknown' } });
    const again = await call();
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('idempotency_outcome_unknown');
    await new Promise((r) => setTimeout(r, 1500)); // the server finished the one write it got
    expect(writes('slow_write')).toBe(1);
  });

  it('an error the server answered is an answer: the claim is released and a retry runs', async () => {
    const call = () => gw.call({ remit_token: token(), tool: 'hostile.failed_write', args: {}, idempotency_key: 'failed-1' });
    const first = await call();
    expect(first.status).toBe(502);
    expect(first.body.error.details).toMatchObject({ mcp_code: -32603 });
    expect(first.body.error.details.outcome).toBeUndefined();
    expect((await call()).status).toBe(502);
    expect(writes('failed_write')).toBe(2);
  });

  it("a structured result is checked against the tool's outputSchema with svc's multipleOf: 19.99 is a multiple of 0.01", async () => {
    const res = await gw.call({ remit_token: token(), tool: 'hostile.priced', args: {} });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.result.structuredContent).toEqual({ amount: 19.99 });
    // A tool of the first page whose result does not fit its output schema: a deterministic failure.
    const bad = await gw.call({ remit_token: token(), tool: 'hostile.bad_shape', args: {} });
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatchObject({ code: 'deterministic_failure', message: expect.stringContaining('does not fit its output schema') });
  });

  it("an outputSchema pattern runs on the linear-time engine, as every schema svc checks does: a backtracking one cannot hold the event loop", async () => {
    const t0 = performance.now();
    const res = await gw.call({ remit_token: token(), tool: 'hostile.catastrophic', args: {} });
    expect(performance.now() - t0).toBeLessThan(5000); // the backtracking engine takes minutes on 34 a's and a !
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'deterministic_failure', message: expect.stringContaining('does not fit its output schema') });
  });

  it('a result MCP does not allow (a content block of type "video") is 422 deterministic_failure naming where; a write\'s is stored, never run again (D §9)', async () => {
    const read = await gw.call({ remit_token: token(), tool: 'hostile.unknown_content', args: {} });
    expect(read.status).toBe(422);
    expect(read.body.error).toMatchObject({ code: 'deterministic_failure', message: 'tool unknown_content answered with a result that is not an MCP tool result: /content/1: Invalid input (a content block of type "video")' });
    const call = () => gw.call({ remit_token: token(), tool: 'hostile.unknown_content_write', args: {}, idempotency_key: 'video-1' });
    expect((await call()).status).toBe(422);
    expect((await call()).body).toMatchObject({ replayed: true, error: { code: 'deterministic_failure' } });
    expect(writes('unknown_content_write')).toBe(1);
    // The server answered every time: the circuit counts none of it.
    for (let i = 0; i < 5; i++) await gw.call({ remit_token: token(), tool: 'hostile.unknown_content', args: {} });
    expect((await gw.call({ remit_token: token(), tool: 'hostile.priced', args: {} })).status).toBe(200);
  });

  it('a JSON-RPC error message is cut to 1000 characters, in a 502 and in a stored 422 (svc-gateway(5) mcp)', async () => {
    const failed = await gw.call({ remit_token: token(), tool: 'hostile.long_error', args: {} });
    expect(failed.status).toBe(502);
    expect(failed.body.error).toMatchObject({ code: 'upstream_error', message: `MCP server hostile: MCP error -32603: ${'e'.repeat(1000 - 18)}`, details: { mcp_code: -32603 } });
    const refused = await gw.call({ remit_token: token(), tool: 'hostile.long_invalid', args: {}, idempotency_key: 'long-1' });
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({ code: 'deterministic_failure', message: `MCP error -32602: ${'e'.repeat(1000 - 18)}` });
    expect(refused.text.length).toBeLessThan(2000);
  });

  it('a server that dies mid-call leaves the write unknown too (last: the server is restarted after it)', async () => {
    const call = () => gw.call({ remit_token: token(), tool: 'hostile.crash_write', args: {}, idempotency_key: 'crash-1' });
    const first = await call();
    expect(first.status).toBe(502);
    expect(first.body.error).toMatchObject({ code: 'upstream_error', details: { outcome: 'unknown' } });
    expect((await call()).body.error.code).toBe('idempotency_outcome_unknown');
    expect(writes('crash_write')).toBe(1);
  });
});

describe('a server that dies right after it starts (svc-gateway(5): restarted with backoff)', () => {
  const HOSTILE = join(ROOT, 'fixtures/gateway/hostile-mcp.mjs');
  const lives = (text: string) => text.split('\n').filter((l) => l.includes('mcp server ready')).length;

  it('the backoff keeps growing: a server that answers initialize is not "recovered" until it stays up', async () => {
    const log = capturedLogger(new Redactor());
    const c = new McpConnector(
      { name: 'flap', type: 'mcp', command: [process.execPath, HOSTILE], env: { HOSTILE_DIE_AFTER_INIT_MS: '50' }, tools: {}, timeout_ms: 4000 } as never,
      { logger: log.logger, initialBackoffMs: 100, maxBackoffMs: 1600 },
    );
    await c.start();
    await new Promise((r) => setTimeout(r, 3000));
    await c.close();
    // Waits of 100, 200, 400, 800, 1600 ms leave room for 4 or 5 lives in 3 s; resetting
    // to 100 ms after every initialize gave one every ~0.2 s (15 or more).
    expect(lives(log.text())).toBeGreaterThanOrEqual(2);
    expect(lives(log.text())).toBeLessThanOrEqual(6);
  }, 15_000);

  it('a server slower to start than the startup bound still comes up: each restart may take twice as long, up to 8 times (svc-gateway(5): its tools appear once it answers)', async () => {
    const log = capturedLogger(new Redactor());
    const c = new McpConnector(
      { name: 'slow', type: 'mcp', command: [process.execPath, HOSTILE], env: { HOSTILE_INIT_DELAY_MS: '1500' }, tools: {}, timeout_ms: 4000 } as never,
      { logger: log.logger, initialBackoffMs: 50, maxBackoffMs: 50, startupTimeoutMs: 1000 },
    );
    try {
      await c.start(); // gives up waiting at 1 s; the server is started again in the background
      expect(c.state).not.toBe('ready');
      // Ended at every 1 s attempt, it never answered; the second attempt may take 2 s.
      const deadline = Date.now() + 15_000;
      while (c.state !== 'ready' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(c.state).toBe('ready');
      expect(await c.call('ok', {}, { signal: AbortSignal.timeout(4000), outcomeUnknown: () => {} } as never)).toEqual({ content: [{ type: 'text', text: 'ok' }] });
    } finally {
      await c.close();
    }
  }, 30_000);

  it(`a server listing new tool names at every start grows the list to ${MAX_TOOLS} tools and no further`, async () => {
    const log = capturedLogger(new Redactor());
    const c = new McpConnector(
      { name: 'fresh', type: 'mcp', command: [process.execPath, HOSTILE], env: { HOSTILE_DIE_AFTER_INIT_MS: '200', HOSTILE_FRESH_TOOLS: '4000' }, tools: {}, timeout_ms: 4000 } as never,
      { logger: log.logger, initialBackoffMs: 50, maxBackoffMs: 50 },
    );
    await c.start();
    // A liveness bound, not a timing: four lives took more than 10 s on a loaded machine.
    const deadline = Date.now() + 30_000;
    while (lives(log.text()) < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await c.close();
    expect(lives(log.text())).toBeGreaterThanOrEqual(4); // 4 × 4,005 names offered
    expect(c.tools()).toHaveLength(MAX_TOOLS);
    expect(log.text()).toContain('mcp server lists more tools than a connector keeps');
  }, 45_000);
});

describe('a server whose descendant escapes its process group (setsid)', () => {
  it('its pipes are let go of a moment after it exits, and its last stderr line still arrives (no descriptors kept per restart)', async () => {
    const lines: string[] = [];
    // The escapee inherits the pipes and outlives the group kill.
    const t = new GroupStdioTransport({ command: 'sh', args: ['-c', 'setsid sleep 37.25 & printf "last words" >&2; exit 0'], env: {}, onStderr: (l) => lines.push(l) });
    const closed = new Promise<void>((r) => (t.onclose = () => r()));
    await t.start();
    await closed;
    const child = (t as unknown as { child: import('node:child_process').ChildProcess }).child;
    expect(child.stdout!.destroyed).toBe(false); // held open by the escapee
    await new Promise((r) => setTimeout(r, PIPE_DRAIN_MS + 300));
    expect([child.stdin!.destroyed, child.stdout!.destroyed, child.stderr!.destroyed]).toEqual([true, true, true]);
    expect(lines).toEqual(['last words']);
    spawnSync('pkill', ['-f', 'sleep 37.25']);
  });
});

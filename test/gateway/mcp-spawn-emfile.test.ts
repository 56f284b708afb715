/**
 * An MCP server started (or restarted) while svcd has no file descriptor left: Node's spawn
 * then hands back a child without its pipes and emits 'error' (EMFILE) on the next tick. The
 * start must fail with that error, which the restart loop logs, not with a TypeError from a
 * pipe that is not there ("Cannot read properties of undefined (reading 'on')", as svcd
 * under `prlimit --nofile` logged it before).
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it, vi } from 'vitest';

vi.mock('node:child_process', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:child_process')>();
  return {
    ...real,
    // What lib/internal/child_process.js does on UV_EMFILE: no stdio, no pid, 'error' next tick.
    spawn: vi.fn(() => {
      const child = new EventEmitter() as EventEmitter & { stdin?: unknown; stdout?: unknown; stderr?: unknown; pid?: number };
      process.nextTick(() => child.emit('error', Object.assign(new Error('spawn node EMFILE'), { code: 'EMFILE', errno: -24, syscall: 'spawn node' })));
      return child;
    }),
  };
});

const { GroupStdioTransport } = await import('../../src/gateway/connectors/mcp-transport.js');

describe('svc-gateway(5) mcp: a server that cannot be spawned for want of descriptors', () => {
  it('fails its start with the spawn error (EMFILE), and reports its close once', async () => {
    const t = new GroupStdioTransport({ command: 'node', args: ['server.js'], env: {} });
    let closes = 0;
    t.onclose = () => closes++;
    await expect(t.start()).rejects.toMatchObject({ code: 'EMFILE', message: 'spawn node EMFILE' });
    expect(closes).toBe(1);
  });
});

/**
 * MCP tool settings in the gateway config (svc-gateway(5) CONNECTORS mcp; interface 2.10's
 * tools map, 4.2 scope derivation: x-svc-scope): a setting that applies to nothing is logged,
 * naming the fix, rather than ignored in silence. Found in a sweep wiring
 * @modelcontextprotocol/server-filesystem from the docs alone: x-svc-scope put on the path
 * property left every read scoped to the whole server, and a misspelled tool name was dropped.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { McpConnector } from '../../src/gateway/connectors/mcp.js';
import { ROOT } from '../helpers/daemon.js';
import { capturedLogger } from './helpers.js';

const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

describe('mcp tool settings that apply to nothing are logged (svc-gateway(5) CONNECTORS mcp)', () => {
  it('x-svc-scope on a property, x-svc-scope naming no argument, and a tool the server does not list', async () => {
    const log = capturedLogger();
    const c = new McpConnector(
      {
        name: 'every',
        type: 'mcp',
        command: [process.execPath, EVERYTHING, 'stdio'],
        env: {},
        timeout_ms: 10_000,
        tools: {
          echo: { input_schema: { type: 'object', required: ['message'], properties: { message: { type: 'string', 'x-svc-scope': 'arg' } } } },
          'get-sum': { input_schema: { type: 'object', 'x-svc-scope': 'left', properties: { a: { type: 'number' }, b: { type: 'number' } } } },
          'get-tiny-image': { input_schema: { type: 'object', 'x-svc-scope': 'path', properties: { path: { type: 'string' } } } },
          ech0: { description: 'misspelled' },
        },
      } as never,
      { logger: log.logger, startupTimeoutMs: 30_000 },
    );
    try {
      await c.start();
      const byOp = new Map(c.tools().map((t) => [t.operation, t.descriptor]));
      expect(byOp.get('echo')!.scope_derivation).toBe('none');
      expect(byOp.get('get-tiny-image')!.scope_derivation).toBe('x-svc-scope');
      const lines = log
        .text()
        .split('\n')
        .filter((l) => l.includes('"level":"warn"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const scopeWarn = (tool: string) => lines.find((l) => l.msg === 'mcp tool x-svc-scope is misplaced' && l.tool === tool);
      expect(scopeWarn('echo')?.problem).toMatch(/x-svc-scope sits on property message; put "x-svc-scope": "message" at the top level/);
      expect(scopeWarn('get-sum')?.problem).toMatch(/x-svc-scope names argument left, which the input schema does not have/);
      expect(scopeWarn('get-tiny-image')).toBeUndefined(); // placed right: no warning
      const unknown = lines.filter((l) => l.msg === 'gateway config sets a tool the mcp server does not list; its settings apply to nothing');
      expect(unknown.map((l) => l.tool)).toEqual(['ech0']);
      expect(unknown[0]!.listed).toContain('echo');
    } finally {
      await c.close();
    }
  }, 40_000);
});

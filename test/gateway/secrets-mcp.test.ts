/**
 * Interface 2.10 ("The substituted value never appears in logs, responses or events") against
 * an MCP server that repeats its `${VAR}` secret (fixtures/gateway/leaky-mcp.mjs): in a tool
 * description, at the end of a stderr line longer than the log keeps, and across the cut of
 * a long error text. Texts are redacted whole before they are cut: a cut through a secret
 * leaves a piece no redaction recognises.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redactor } from '../../src/log/logger.js';
import { ROOT } from '../helpers/daemon.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { capturedLogger, startGateway, type TestGateway } from './helpers.js';

const SECRET = 'p@ss/w:rd"q-LEAK';
const PIECE = 'p@ss/w:rd'; // what a cut at the wrong place would leave
const signer = testSigner();
let gw: TestGateway;
let logText = () => '';

beforeAll(async () => {
  const redactor = new Redactor();
  const log = capturedLogger(redactor);
  logText = log.text;
  gw = await startGateway({
    keys: signer,
    redactor,
    logger: log.logger,
    env: { LEAK_SECRET: SECRET },
    doc: { connectors: [{ name: 'leaky', type: 'mcp', command: ['node', join(ROOT, 'fixtures/gateway/leaky-mcp.mjs')], env: { LEAK_SECRET: '${LEAK_SECRET}' } }] },
  });
}, 30_000);

afterAll(async () => {
  await gw?.close();
});

describe('an MCP server that repeats its secret (I 2.10)', () => {
  it('a long error text is redacted before it is cut', async () => {
    const token = mintToken(signer, remitPayload(signer, { tools: ['leaky.*'], scopes: ['leaky:*'], autonomy: 'autonomous' }));
    const res = await gw.call({ remit_token: token, tool: 'leaky.long_error', args: {} });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('deterministic_failure');
    expect(res.body.error.message).toMatch(/x{990}\[REDACTED\]$/);
    expect(res.text).not.toContain(PIECE);
  });

  it('a long JSON-RPC error message is redacted before it is cut to 1000 characters (I 2.10; svc-gateway(5) mcp)', async () => {
    const token = mintToken(signer, remitPayload(signer, { tools: ['leaky.*'], scopes: ['leaky:*'], autonomy: 'autonomous' }));
    const res = await gw.call({ remit_token: token, tool: 'leaky.long_rpc_error', args: {} });
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'upstream_error', details: { mcp_code: -32603 } });
    // The secret starts 10 characters before the cut: redacted whole first, then cut after
    // its mark (cut first, its first 10 characters would be left for no redaction to know).
    expect(res.body.error.message).toMatch(/^MCP server leaky: MCP error -32603: x{972}\[REDACTED\]$/);
    expect(res.text).not.toContain(PIECE);
  });

  it('tool descriptions and a stderr line longer than the log keeps show no piece of it', async () => {
    const tools = await gw.req('GET', '/tools');
    expect(tools.text).toContain('uses token [REDACTED]');
    expect(tools.text).not.toContain(PIECE);
    const lines = logText().split('\n').filter((l) => l.includes('mcp stderr'));
    expect(lines.length).toBeGreaterThan(0);
    expect(logText()).not.toContain(PIECE);
  });
});

/**
 * Decisions §9: "Only upstream errors count (not 4xx from our own checks, not deterministic
 * failures)" and a half-open trial's success closes the circuit — the upstream's success. A
 * call svc refuses before asking anything (an MCP task-only tool: RefusedBeforeAsking) is
 * neither: until 2026-11-29 it closed a half-open circuit it had learned nothing about.
 * A real server-everything on a manual clock.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { ROOT } from '../helpers/daemon.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { startGateway, type TestGateway } from './helpers.js';

const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const signer = testSigner();
const clock = new ManualClock(Date.now());
let gw: TestGateway;
const token = () => mintToken(signer, remitPayload(signer, { tools: ['everything.*'], scopes: ['mcp:everything:*'] }, Math.floor(clock.now() / 1000)));

beforeAll(async () => {
  gw = await startGateway({
    keys: signer,
    clock,
    random: () => 0.5, // no jitter: 10 s exactly
    doc: { connectors: [{ name: 'everything', type: 'mcp', command: ['node', EVERYTHING, 'stdio'], timeout_ms: 300 }] },
  });
}, 30_000);
afterAll(async () => {
  await gw?.close();
});

describe('a half-open trial spent on a call svc refuses before asking (D §9)', () => {
  it('does not close a half-open circuit (the upstream was never asked)', async () => {
    const slow = { remit_token: token(), tool: 'everything.trigger-long-running-operation', args: { duration: 5, steps: 1 } };
    for (let i = 0; i < 5; i++) expect((await gw.call(slow)).status).toBe(502); // 5 timeouts: upstream errors
    const breaker = gw.gateway.breaker('everything')!;
    expect(breaker.state).toBe('open');
    clock.advance(10_001);
    expect(breaker.state).toBe('half_open');

    // The half-open trial: a task-only tool, refused by svc before any request is sent.
    const res = await gw.call({ remit_token: token(), tool: 'everything.simulate-research-query', args: { topic: 'x' } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('deterministic_failure');

    // Nothing was learned about the upstream: still half-open, the trial slot back for a real call.
    expect(breaker.state).toBe('half_open');
    const echo = await gw.call({ remit_token: token(), tool: 'everything.echo', args: { message: 'back' } });
    expect(echo.status).toBe(200);
    expect(breaker.state).toBe('closed');
  }, 30_000);
});

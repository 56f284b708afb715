/**
 * The gateway's log while its idempotency store refuses writes (a full disk): a claim that
 * fails fails every call, and is logged once every 10 s rather than once per call (health
 * says the fault meanwhile).
 */
import { describe, expect, it } from 'vitest';
import { Redactor } from '../../src/log/logger.js';
import type { SqliteDb } from '../../src/store/sqlite-db.js';
import { mintToken, remitPayload, testSigner } from '../helpers/remit-token.js';
import { capturedLogger, startGateway } from './helpers.js';

describe('idempotency store faults in the gateway log', () => {
  it('a claim that fails on every call (a full disk) is logged once, not once per call', async () => {
    const signer = testSigner();
    const log = capturedLogger(new Redactor());
    await using g = await startGateway({ keys: signer, env: { SVC_GATEWAY_TEST_TOOLS: '1' }, logger: log.logger });
    const t = mintToken(signer, remitPayload(signer));
    const raw = (g.gateway.store.db as SqliteDb).raw;
    raw.pragma(`max_page_count = ${raw.pragma('page_count', { simple: true }) as number}`);
    let failed = 0;
    for (let i = 0; i < 500 && failed < 30; i++) {
      const r = await g.call({ remit_token: t, tool: 'test.write', args: { i }, idempotency_key: `k-${i}` });
      if (r.status === 503) failed++;
    }
    expect(failed).toBe(30);
    expect((await g.req('GET', '/health')).body).toMatchObject({ ok: false, store: { error: 'SQLITE_FULL' } });
    const lines = log.text().split('\n').filter((l) => l.includes('idempotency store: cannot claim'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'error', tool: 'test.write', err: expect.stringContaining('full') });
    raw.pragma('max_page_count = 4294967294');
  });
});

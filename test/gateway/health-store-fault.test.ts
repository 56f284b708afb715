/**
 * The gateway's GET /v1/health (interface 4.2) and its store: after a failed fsync gateway.db
 * takes no write until restart (docs/design.md Group commit), and the health says so, as the
 * kernel's does (svcd(8) unavailable): ok false, with the fault under `store`.
 */
import { describe, expect, it, vi } from 'vitest';
import { testSigner } from '../helpers/remit-token.js';
import { startGateway } from './helpers.js';

const fsFail = vi.hoisted(() => ({ next: false }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const eio = () => Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
  return {
    ...fs,
    fdatasync(fd: number, cb: (err: NodeJS.ErrnoException | null) => void) {
      if (fsFail.next) {
        fsFail.next = false;
        return void setImmediate(() => cb(eio()));
      }
      fs.fdatasync(fd, cb);
    },
    fdatasyncSync(fd: number) {
      if (fsFail.next) {
        fsFail.next = false;
        throw eio();
      }
      fs.fdatasyncSync(fd);
    },
  };
});

describe('a gateway store stopped by a failed fsync (I 4.2 health)', () => {
  it('is reported by the gateway /v1/health (writes are 503 until restart)', async () => {
    await using gw = await startGateway({ keys: testSigner(), env: { SVC_GATEWAY_TEST_TOOLS: '1' } });
    expect((await gw.req('GET', '/health')).body.ok).toBe(true);
    fsFail.next = true;
    // A non-durable write (a call's stored result) whose lazy barrier fails: nobody is told.
    await gw.gateway.store.db.tx((t) => t.run('DELETE FROM gateway_idempotency WHERE 0'), { durable: false });
    await new Promise((r) => setTimeout(r, 300));
    await expect(gw.gateway.store.db.run('DELETE FROM gateway_idempotency WHERE 0')).rejects.toMatchObject({ code: 'EIO' }); // refused for good now
    const h = await gw.req('GET', '/health');
    expect(h.body).toMatchObject({ ok: false, version: expect.any(String), connectors: expect.any(Object), store: { error: 'EIO', message: expect.stringMatching(/restart svcd/), since: expect.any(String) } });
  });
});

/**
 * The gateway's HTTP link to the kernel's keys (interface 4.1 GET /keys, decisions §2): a
 * token naming a key the cache does not know refreshes at once (a rotation must not refuse
 * good remits), and only refreshes that did not help are held back, so made-up key ids cannot
 * turn every call into a request to the kernel. Against a real local HTTP server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mayPass } from '../../src/gateway/event-outbox.js';
import { HttpKernelLink, isCredentialRefusal, KernelUnreachable } from '../../src/gateway/kernel-link.js';
import { keyPairFromSeed } from '../../src/keys/ed25519.js';

const KEY_A = { key_id: 'k-a', algorithm: 'ed25519', public_key: keyPairFromSeed(Buffer.alloc(32, 1)).publicKey.toString('base64url') };
const KEY_B = { key_id: 'k-b', algorithm: 'ed25519', public_key: keyPairFromSeed(Buffer.alloc(32, 2)).publicKey.toString('base64url') };
/** The identity point: every signature with R = identity and S = 0 verifies under it. */
const SMALL_ORDER = Buffer.concat([Buffer.from([1]), Buffer.alloc(31)]).toString('base64url');

let server: Server | null = null;

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = null;
});

/** A kernel that serves whatever `keys.body` holds (or `keys.status`), counting requests. */
async function fakeKeys(): Promise<{ url: string; keys: { body: unknown; status: number; hits: number; delayMs: number } }> {
  const keys = { body: { ...KEY_A, previous: [] } as unknown, status: 200, hits: 0, delayMs: 0 };
  server = createServer((req, res) => {
    keys.hits++;
    // What the kernel held when the request arrived, answered after `delayMs`.
    const [status, body] = [req.url === '/v1/keys' ? keys.status : 404, JSON.stringify(keys.body)];
    setTimeout(() => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    }, keys.delayMs);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, keys };
}

describe('HttpKernelLink.trustedKeys (I 4.1 /keys, D §2 rotation)', () => {
  it('a lookup that joined a fetch which left before the rotation asks once more', async () => {
    const { url, keys } = await fakeKeys();
    const link = new HttpKernelLink({ kernelUrl: url, token: null, now: () => 1_000_000 });
    await link.trustedKeys('k-a');
    // A made-up id starts a fetch; the kernel rotates while it is on its way; a token with the
    // new key arrives and joins it.
    keys.delayMs = 100;
    const first = link.trustedKeys('made-up');
    while (keys.hits < 2) await new Promise((r) => setTimeout(r, 5)); // it reached the kernel
    keys.body = { ...KEY_B, previous: [KEY_A] };
    const [, fresh] = await Promise.all([first, link.trustedKeys('k-b')]);
    expect(fresh.lookup('k-b')).not.toBeNull();
    expect(keys.hits).toBe(3);
  });

  it('keys the kernel lists that no configured key could be (small order, not a point, not 32 bytes) are not trusted (D §2)', async () => {
    const { url, keys } = await fakeKeys();
    const bad = [
      { key_id: 'k-small', public_key: SMALL_ORDER },
      { key_id: 'k-notpoint', public_key: Buffer.alloc(32, 2).toString('base64url') },
      { key_id: 'k-short', public_key: Buffer.alloc(31, 7).toString('base64url') },
    ];
    keys.body = { ...KEY_A, previous: [...bad, KEY_B] };
    const link = new HttpKernelLink({ kernelUrl: url, token: null, minRefreshMs: 0 });
    const trusted = await link.trustedKeys('k-a');
    expect(trusted.lookup('k-a')).not.toBeNull();
    expect(trusted.lookup('k-b')).not.toBeNull();
    for (const k of bad) expect((await link.trustedKeys(k.key_id)).lookup(k.key_id), k.key_id).toBeNull();
  });

  it('a key id rotated in right after a fetch is found at once', async () => {
    const { url, keys } = await fakeKeys();
    let now = 1_000_000;
    const link = new HttpKernelLink({ kernelUrl: url, token: null, now: () => now });
    expect((await link.trustedKeys('k-a')).lookup('k-a')).not.toBeNull();
    expect(keys.hits).toBe(1);
    keys.body = { ...KEY_B, previous: [KEY_A] };
    now += 10; // well inside the throttle that holds back refreshes that did not help
    const after = await link.trustedKeys('k-b');
    expect(after.lookup('k-b')).not.toBeNull();
    expect(after.lookup('k-a')).not.toBeNull();
    expect(keys.hits).toBe(2);
    // Known ids are served from the cache.
    await link.trustedKeys('k-a');
    await link.trustedKeys('k-b');
    expect(keys.hits).toBe(2);
  });

  it('made-up key ids refresh once per minRefreshMs, and concurrent lookups share one fetch', async () => {
    const { url, keys } = await fakeKeys();
    let now = 1_000_000;
    const link = new HttpKernelLink({ kernelUrl: url, token: null, minRefreshMs: 1000, now: () => now });
    await link.trustedKeys('k-a');
    // Twenty at once: the first fetch, and one more for those that joined it (it might have
    // left before a rotation), shared by all of them.
    const bogus = await Promise.all(Array.from({ length: 20 }, (_, i) => link.trustedKeys(`made-up-${i}`)));
    expect(bogus.every((k) => k.lookup('made-up-0') === null)).toBe(true);
    expect(keys.hits).toBe(3);
    now += 999;
    await link.trustedKeys('made-up-x');
    expect(keys.hits).toBe(3);
    now += 1;
    await link.trustedKeys('made-up-y');
    expect(keys.hits).toBe(4);
  });

  it('a kernel that does not answer is unavailable until it does; a failed refresh keeps the cache', async () => {
    const { url, keys } = await fakeKeys();
    let now = 1_000_000;
    keys.status = 503;
    const link = new HttpKernelLink({ kernelUrl: url, token: null, minRefreshMs: 1000, now: () => now });
    await expect(link.trustedKeys('k-a')).rejects.toMatchObject({ code: 'unavailable' });
    await expect(link.trustedKeys('k-a')).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('not known yet') });
    expect(keys.hits).toBe(1);
    now += 1000;
    keys.status = 200;
    expect((await link.trustedKeys('k-a')).lookup('k-a')).not.toBeNull();
    keys.status = 503;
    now += 5000;
    // The kernel is down again: a key id it might know cannot be judged (unavailable, not a
    // bad signature); the known ones still verify from the cache.
    await expect(link.trustedKeys('k-b')).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('answered 503') });
    expect((await link.trustedKeys('k-a')).lookup('k-a')).not.toBeNull();
    expect(keys.hits).toBe(3);
  });
});

describe('HttpKernelLink.trustedKeys and a wall clock stepped back (D §2 rotation)', () => {
  it('a key rotated in after the step is fetched after minRefreshMs, not after the step', async () => {
    const { url, keys } = await fakeKeys();
    const real = Date.now.bind(Date);
    let offset = 0;
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => real() + offset);
    try {
      const link = new HttpKernelLink({ kernelUrl: url, token: null, minRefreshMs: 50 });
      await link.trustedKeys('k-a');
      await link.trustedKeys('made-up'); // a refresh that did not help: the next one waits minRefreshMs
      offset = -3_600_000;
      keys.body = { ...KEY_B, previous: [{ ...KEY_A, retired_at: '2026-11-22T10:00:00.000Z' }] };
      await new Promise((r) => setTimeout(r, 80));
      expect((await link.trustedKeys('k-b')).lookup('k-b')).not.toBeNull();
    } finally {
      spy.mockRestore();
    }
  });
});

describe('HttpKernelLink.appendEvent: which failures the outbox asks again (D §7, svc-gateway(5))', () => {
  async function answering(status: number, body: unknown): Promise<string> {
    server = createServer((_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
  }
  const ev = { kind: 'tool.called', payload: {}, actor: { id: 'gateway', role: 'gateway' } };
  const failure = async (url: string): Promise<unknown> => new HttpKernelLink({ kernelUrl: url, token: null, timeoutMs: 2000 }).appendEvent('run_X', ev, { lease: 'lse_1' }).then(() => null, (e: unknown) => e);

  it('a 503, a 429 and a refused bearer may pass', async () => {
    for (const [status, code] of [[503, 'unavailable'], [429, 'rate_limited'], [401, 'unauthorized']] as const) {
      const err = await failure(await answering(status, { error: { code, message: 'x', details: {} } }));
      expect(mayPass(err), `${status} ${code}`).toBe(true);
      expect(err).not.toBeInstanceOf(KernelUnreachable); // an answer: only this run's events wait
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = null;
    }
  });

  it('an answer that is not svcd\'s (a proxy\'s HTML 404 for a mistyped kernel_url) may pass: the events wait for the address to be fixed', async () => {
    server = createServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('<html>not here</html>');
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const err = await failure(`http://127.0.0.1:${(server!.address() as AddressInfo).port}`);
    expect(mayPass(err)).toBe(true);
    expect(err).not.toBeInstanceOf(KernelUnreachable);
  });

  it('a refused credential falls through to the next; an unknown run is final', async () => {
    const cred = await failure(await answering(401, { error: { code: 'credential_invalid', message: 'ended', details: {} } }));
    expect(isCredentialRefusal(cred)).toBe(true);
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    const gone = await failure(await answering(404, { error: { code: 'not_found', message: 'run run_X not found', details: {} } }));
    expect(isCredentialRefusal(gone)).toBe(false);
    expect(mayPass(gone)).toBe(false);
  });

  it('a kernel that takes the request and never answers: KernelUnreachable with timedOut (it may still take it later)', async () => {
    server = createServer(() => {}); // never answers
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
    const err = await new HttpKernelLink({ kernelUrl: url, token: null })
      .appendEvent('run_X', ev, { lease: 'lse_1' }, { timeoutMs: 200 })
      .then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(KernelUnreachable);
    expect(err).toMatchObject({ timedOut: true, message: `cannot reach the kernel at ${url}: no answer within 200 ms` });
    server!.closeAllConnections();
  });

  it('no kernel listening: a failure that may pass, naming the address and the system error', async () => {
    const url = await answering(200, {});
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = null;
    const err = (await failure(url)) as Error;
    expect(mayPass(err)).toBe(true);
    expect(err).toBeInstanceOf(KernelUnreachable); // no answer: the outbox stops its pass here
    expect((err as KernelUnreachable).timedOut).toBe(false); // refused: nothing was sent
    expect(err.message).toBe(`cannot reach the kernel at ${url}: ECONNREFUSED`);
  });
});

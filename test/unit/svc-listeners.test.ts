/**
 * svcd's own listeners are no tool's upstream (src/gateway/svc-listeners.ts, svc-gateway(5)
 * "http"): every spelling of a loopback or unspecified address on a listener's port names it,
 * and so does a DNS name that resolves to one; other ports and other hosts do not.
 */
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

const lookup = vi.hoisted(() => vi.fn());
vi.mock('node:dns/promises', () => ({ lookup }));

const { isSvcListener, LOOKUP_TIMEOUT_MS, reachesSvcListener, registerSvcListener } = await import('../../src/gateway/svc-listeners.js');
const { isLoopbackAddress, isLoopbackName } = await import('../../src/util/loopback.js');

const PORT = 45678;
const OWN = 45679;
const unregister = [registerSvcListener(`http://127.0.0.1:${PORT}`), registerSvcListener(`http://192.0.2.2:${OWN}`)];
afterAll(() => unregister.forEach((u) => u()));
beforeEach(() => lookup.mockReset());

describe('loopback addresses are compared as addresses (src/util/loopback.ts)', () => {
  it('takes every spelling of 127/8 and ::1, IPv4-mapped in dotted or hex form', () => {
    for (const a of ['127.0.0.1', '127.9.8.7', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:7f00:0001', 'localhost']) expect(isLoopbackAddress(a), a).toBe(true);
    for (const a of ['10.0.0.1', '::ffff:a00:1', '128.0.0.1', '::2', 'example.com', '', undefined]) expect(isLoopbackAddress(a), String(a)).toBe(false);
  });
  it('takes loopback names with the root dot and *.localhost names', () => {
    for (const h of ['localhost.', 'LOCALHOST', 'api.localhost', 'api.localhost.', '[::ffff:7f00:1]']) expect(isLoopbackName(h), h).toBe(true);
    for (const h of ['localhost.example', 'example.com.', '[::ffff:a00:1]']) expect(isLoopbackName(h), h).toBe(false);
  });
});

describe('isSvcListener', () => {
  it("names the listener in any spelling of loopback or the unspecified address, on the listener's port only", () => {
    for (const host of ['127.0.0.1', '127.1', '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[0:0:0:0:0:ffff:7f00:1]', 'localhost', 'localhost.', '0', '0.0.0.0', '[::]', '2130706433']) {
      expect(isSvcListener(new URL(`http://${host}:${PORT}/v1/remits`)), host).toBe(true);
    }
    expect(isSvcListener(new URL(`http://127.0.0.1:${PORT + 2}/`))).toBe(false);
    expect(isSvcListener(new URL(`http://10.0.0.1:${PORT}/`))).toBe(false);
  });
  it("names a listener on its own address in the address's other spellings (IPv4-mapped, dotted or hex)", () => {
    for (const host of ['192.0.2.2', '[::ffff:192.0.2.2]', '[::ffff:c000:202]']) expect(isSvcListener(new URL(`http://${host}:${OWN}/`)), host).toBe(true);
    expect(isSvcListener(new URL(`http://192.0.2.3:${OWN}/`))).toBe(false);
  });
});

describe('reachesSvcListener', () => {
  it("refuses a DNS name on the listener's port that resolves to loopback", async () => {
    lookup.mockResolvedValue([{ address: '93.184.216.34', family: 4 }, { address: '::ffff:127.0.0.1', family: 6 }]);
    expect(await reachesSvcListener(new URL(`http://rebind.example:${PORT}/v1/remits`))).toBe(`rebind.example:${PORT} is a listener of this svcd, which no tool may call`);
    expect(lookup).toHaveBeenCalledWith('rebind.example', expect.objectContaining({ all: true }));
  });
  it('lets a name through that resolves elsewhere, or that does not resolve (fetch then fails as it would)', async () => {
    lookup.mockResolvedValueOnce([{ address: '93.184.216.34', family: 4 }]);
    expect(await reachesSvcListener(new URL(`http://public.example:${PORT}/`))).toBeNull();
    lookup.mockRejectedValueOnce(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }));
    expect(await reachesSvcListener(new URL(`http://nowhere.example:${PORT}/`))).toBeNull();
  });
  it("refuses a name that resolves to the listener's own address in its IPv4-mapped form", async () => {
    lookup.mockResolvedValueOnce([{ address: '::ffff:192.0.2.2', family: 6 }]);
    expect(await reachesSvcListener(new URL(`http://own.example:${OWN}/`))).toMatch(/is a listener of this svcd/);
  });
  it('a look-up with no answer in time is refused, not waited on past the deadline (a stalled resolver)', async () => {
    vi.useFakeTimers();
    try {
      lookup.mockReturnValueOnce(new Promise(() => {}));
      const answer = reachesSvcListener(new URL(`http://stalled.example:${PORT}/`));
      await vi.advanceTimersByTimeAsync(LOOKUP_TIMEOUT_MS);
      expect(await answer).toBe(`stalled.example did not resolve within ${LOOKUP_TIMEOUT_MS / 1000} s, so it cannot be told apart from this svcd's listener on port ${PORT}`);
    } finally {
      vi.useRealTimers();
    }
  });
  it("looks nothing up for another port or an address literal: other calls pay nothing", async () => {
    expect(await reachesSvcListener(new URL(`http://rebind.example:${PORT + 2}/`))).toBeNull();
    expect(await reachesSvcListener(new URL(`http://10.0.0.1:${PORT}/`))).toBeNull();
    expect(await reachesSvcListener(new URL(`http://[::ffff:7f00:1]:${PORT}/`))).not.toBeNull();
    expect(lookup).not.toHaveBeenCalled();
  });
});

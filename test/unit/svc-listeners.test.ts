/**
 * svcd's own listeners are no tool's upstream (src/gateway/svc-listeners.ts, svc-gateway(5)
 * "http"): every spelling of a loopback or unspecified address on a listener's port names it,
 * and so does a DNS name that resolves to one; other ports and other hosts do not.
 */
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

const lookup = vi.hoisted(() => vi.fn());
vi.mock('node:dns/promises', () => ({ lookup }));

const { isSvcListener, reachesSvcListener, registerSvcListener } = await import('../../src/gateway/svc-listeners.js');
const { isLoopbackAddress, isLoopbackName } = await import('../../src/util/loopback.js');

const PORT = 45678;
const unregister = registerSvcListener(`http://127.0.0.1:${PORT}`);
afterAll(() => unregister());
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
    expect(isSvcListener(new URL(`http://127.0.0.1:${PORT + 1}/`))).toBe(false);
    expect(isSvcListener(new URL(`http://10.0.0.1:${PORT}/`))).toBe(false);
  });
});

describe('reachesSvcListener', () => {
  it("refuses a DNS name on the listener's port that resolves to loopback", async () => {
    lookup.mockResolvedValue([{ address: '93.184.216.34', family: 4 }, { address: '::ffff:127.0.0.1', family: 6 }]);
    expect(await reachesSvcListener(new URL(`http://rebind.example:${PORT}/v1/remits`))).toBe(true);
    expect(lookup).toHaveBeenCalledWith('rebind.example', expect.objectContaining({ all: true }));
  });
  it('lets a name through that resolves elsewhere, or that does not resolve (fetch then fails as it would)', async () => {
    lookup.mockResolvedValueOnce([{ address: '93.184.216.34', family: 4 }]);
    expect(await reachesSvcListener(new URL(`http://public.example:${PORT}/`))).toBe(false);
    lookup.mockRejectedValueOnce(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }));
    expect(await reachesSvcListener(new URL(`http://nowhere.example:${PORT}/`))).toBe(false);
  });
  it("looks nothing up for another port or an address literal: other calls pay nothing", async () => {
    expect(await reachesSvcListener(new URL(`http://rebind.example:${PORT + 1}/`))).toBe(false);
    expect(await reachesSvcListener(new URL(`http://10.0.0.1:${PORT}/`))).toBe(false);
    expect(await reachesSvcListener(new URL(`http://[::ffff:7f00:1]:${PORT}/`))).toBe(true);
    expect(lookup).not.toHaveBeenCalled();
  });
});

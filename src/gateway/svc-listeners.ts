/**
 * The listeners of this svcd process (kernel and gateway), which no tool may call. An http
 * connector whose `allowed_hosts` lists 127.0.0.1 or localhost (a local service beside svcd)
 * would otherwise let an agent that can only reach the gateway POST to the kernel on the
 * same host — mint a remit, decide an approval — with the loopback trust of a tokenless
 * kernel. svcd registers each listener once it is bound and removes it when it closes.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { bareHost, isLoopbackName, isUnspecifiedAddress, sameHost } from '../util/loopback.js';

const listeners = new Map<string, { host: string; port: string }>();

/** Registers `url` (http://host:port) as a listener of this process; returns its removal. */
export function registerSvcListener(url: string): () => void {
  const u = new URL(url);
  const entry = { host: bareHost(u.hostname), port: portOf(u) };
  listeners.set(url, entry);
  return () => void listeners.delete(url);
}

/**
 * True when `url` names a listener of this process: its port, on a loopback name or address
 * (any spelling), the unspecified address, or the listener's own host; any host at all when
 * the listener is bound to every interface.
 */
export function isSvcListener(url: URL): boolean {
  const host = bareHost(url.hostname);
  const port = portOf(url);
  return [...listeners.values()].some((l) => l.port === port && reaches(host, l));
}

/** True when a connection to `host` on the listener's port reaches that listener. */
function reaches(host: string, l: { host: string }): boolean {
  return sameHost(host, l.host) || isUnspecifiedAddress(host) || isLoopbackName(host) || isUnspecifiedAddress(l.host);
}

/**
 * Why `url` may not be called, or null: isSvcListener, and for a DNS name on a listener's port, its addresses too: a name in
 * `allowed_hosts` that resolves to loopback reaches svcd as 127.0.0.1 does. Only names on a
 * listener's port are looked up, so other calls pay nothing; a look-up with no answer within
 * LOOKUP_TIMEOUT_MS counts as reaching svcd (refused). A name whose answers change
 * between this lookup and fetch's own (DNS rebinding) is beyond it: the listeners themselves
 * refuse a tokenless request whose Host is not a name of this machine.
 */
export async function reachesSvcListener(url: URL): Promise<string | null> {
  const listener = `${url.host} is a listener of this svcd, which no tool may call`;
  if (isSvcListener(url)) return listener;
  const host = bareHost(url.hostname);
  const port = portOf(url);
  const onPort = [...listeners.values()].filter((l) => l.port === port);
  if (onPort.length === 0 || isIP(host) !== 0) return null;
  let addresses: Array<{ address: string }> | 'late';
  let timer: NodeJS.Timeout | undefined;
  try {
    addresses = await Promise.race([
      lookup(host, { all: true, verbatim: true }),
      new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), LOOKUP_TIMEOUT_MS))),
    ]);
  } catch {
    return null; // fetch finds the same: the call fails as cannot-reach
  } finally {
    clearTimeout(timer);
  }
  // No answer in time: the name is not let through unchecked to a listener's port.
  if (addresses === 'late') return `${url.hostname} did not resolve within ${LOOKUP_TIMEOUT_MS / 1000} s, so it cannot be told apart from this svcd's listener on port ${port}`;
  return addresses.some(({ address }) => onPort.some((l) => reaches(address, l))) ? listener : null;
}

/** How long a look-up may take before a name on a listener's port is refused (the resolver is stalled). */
export const LOOKUP_TIMEOUT_MS = 2_000;

/** The URL's port, or its scheme's default. */
function portOf(u: URL): string {
  return u.port || (u.protocol === 'https:' ? '443' : '80');
}

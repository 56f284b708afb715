/**
 * The listeners of this svcd process (kernel and gateway), which no tool may call. An http
 * connector whose `allowed_hosts` lists 127.0.0.1 or localhost (a local service beside svcd)
 * would otherwise let an agent that can only reach the gateway POST to the kernel on the
 * same host — mint a remit, decide an approval — with the loopback trust of a tokenless
 * kernel. svcd registers each listener once it is bound and removes it when it closes.
 */
import { bareHost, isLoopbackName } from '../util/loopback.js';

const listeners = new Map<string, { host: string; port: string }>();

/** Registers `url` (http://host:port) as a listener of this process; returns its removal. */
export function registerSvcListener(url: string): () => void {
  const u = new URL(url);
  const entry = { host: bareHost(u.hostname), port: portOf(u) };
  listeners.set(url, entry);
  return () => void listeners.delete(url);
}

/** True when `url` reaches a listener of this process: its port, on a loopback name or the listener's own host. */
export function isSvcListener(url: URL): boolean {
  const host = bareHost(url.hostname);
  const port = portOf(url);
  for (const l of listeners.values()) {
    if (l.port === port && (host === l.host || host === '0.0.0.0' || isLoopbackName(host) || l.host === '0.0.0.0' || l.host === '::')) return true;
  }
  return false;
}

/** The URL's port, or its scheme's default. */
function portOf(u: URL): string {
  return u.port || (u.protocol === 'https:' ? '443' : '80');
}

/**
 * Loopback names and addresses, in one place for the listeners (who may call without a
 * token) and the gateway (which svcd listeners a tool may not reach).
 */

/** A loopback address (`127.x.x.x`, `::1`, IPv4-mapped) or `localhost`. */
export function isLoopbackAddress(addr: string | undefined): boolean {
  if (!addr) return false;
  const a = addr.startsWith('::ffff:') ? addr.slice(7) : addr;
  return a === '::1' || a === 'localhost' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

/** A URL host as compared: lower-cased, an IPv6 literal without its brackets. */
export function bareHost(host: string): string {
  return host.toLowerCase().replace(/^\[|\]$/g, '');
}

/** A host name that reaches this machine's loopback: a loopback address (brackets allowed) or a `*.localhost` name. */
export function isLoopbackName(host: string): boolean {
  const h = bareHost(host);
  return isLoopbackAddress(h) || h.endsWith('.localhost');
}

/**
 * Loopback names and addresses, in one place for the listeners (who may call without a
 * token) and the gateway (which svcd listeners a tool may not reach). Addresses are compared
 * as addresses, not as text: `::ffff:7f00:1`, `0:0:0:0:0:ffff:127.0.0.1` and `127.0.0.1` are
 * one address, and a URL parser hands IPv4-mapped IPv6 literals on in the hex spelling.
 */
import { BlockList, isIP, isIPv6 } from 'node:net';

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4'); // IPv4-mapped IPv6 addresses match IPv4 rules
loopback.addAddress('::1', 'ipv6');

/** The addresses that mean "this host" when connected to (Linux connects them to loopback). */
const unspecified = new BlockList();
unspecified.addAddress('0.0.0.0', 'ipv4');
unspecified.addAddress('::', 'ipv6');

function inList(list: BlockList, addr: string): boolean {
  try {
    return list.check(addr, isIPv6(addr) ? 'ipv6' : 'ipv4');
  } catch {
    return false; // not an address
  }
}

/** A loopback address (`127.x.x.x`, `::1`, IPv4-mapped in either spelling) or `localhost`. */
export function isLoopbackAddress(addr: string | undefined): boolean {
  if (!addr) return false;
  // The spellings a loopback client's socket reports, answered without BlockList.check: it
  // builds a SocketAddress and tests an IPv6 regexp on every call (≈1 % of the kernel's CPU
  // in a profile of the step-cycle benchmark, where every request passes here).
  if (COMMON_LOOPBACK.has(addr)) return true;
  return addr === 'localhost' || inList(loopback, addr);
}

const COMMON_LOOPBACK: ReadonlySet<string> = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/** `0.0.0.0` or `::` (any spelling): connecting to it reaches this host's listeners. */
export function isUnspecifiedAddress(addr: string): boolean {
  return inList(unspecified, addr);
}

/**
 * True when `a` and `b` name the same host: the same address in any spelling (an IPv4
 * address and its IPv4-mapped IPv6 form, hex or dotted, are one), or the same name.
 */
export function sameHost(a: string, b: string): boolean {
  const x = bareHost(a);
  const y = bareHost(b);
  if (x === y) return true;
  if (isIP(x) === 0 || isIP(y) === 0) return false;
  const one = new BlockList();
  one.addAddress(x, isIPv6(x) ? 'ipv6' : 'ipv4');
  return inList(one, y);
}

/** A URL host as compared: lower-cased, an IPv6 literal without its brackets. */
export function bareHost(host: string): string {
  return host.toLowerCase().replace(/^\[|\]$/g, '');
}

/**
 * A host name that reaches this machine's loopback: a loopback address (brackets allowed) or
 * `localhost` / a `*.localhost` name, with or without the root's trailing dot.
 */
export function isLoopbackName(host: string): boolean {
  const h = bareHost(host).replace(/\.$/, '');
  return isLoopbackAddress(h) || h.endsWith('.localhost');
}

/**
 * The global options of decisions §11 and the output helpers every command uses: data on
 * stdout (JSON with --json), progress and errors on stderr.
 */
import { urlHasCredentials } from '../src/util/url-credentials.js';
import type { Command } from 'commander';
import { CliError, EXIT, usageError } from './exit.js';
import { SvcHttpClient } from './http-client.js';
import { fetchBlockedPortHint, urlHasFetchBlockedPort } from '../src/util/fetch-blocked-ports.js';
import { decimalOf } from '../src/util/number-text.js';
import { clean, cleanText, columns, pad, terminalJson } from './terminal-text.js';

export interface GlobalOptions {
  kernelUrl: string;
  gatewayUrl: string;
  token?: string;
  actor?: string;
  json: boolean;
  timeout?: string;
}

export function globals(cmd: Command): GlobalOptions {
  const o = cmd.optsWithGlobals<Partial<GlobalOptions>>();
  return {
    // `||`: an empty variable means "not set", as in a shell that exported VAR=.
    kernelUrl: o.kernelUrl || process.env.SVC_KERNEL_URL || 'http://127.0.0.1:7401',
    gatewayUrl: o.gatewayUrl || process.env.SVC_GATEWAY_URL || 'http://127.0.0.1:7402',
    token: o.token || process.env.SVC_TOKEN || undefined,
    actor: o.actor || process.env.SVC_ACTOR || undefined,
    json: Boolean(o.json),
  };
}

/** The address a command is about to use; one that is not an http(s) URL is a usage error naming its source. */
function checkedUrl(cmd: Command, which: 'kernel' | 'gateway'): string {
  const flag = cmd.optsWithGlobals<Partial<GlobalOptions>>()[which === 'kernel' ? 'kernelUrl' : 'gatewayUrl'];
  const value = which === 'kernel' ? globals(cmd).kernelUrl : globals(cmd).gatewayUrl;
  const source = flag ? `--${which}-url` : which === 'kernel' ? 'SVC_KERNEL_URL' : 'SVC_GATEWAY_URL';
  // Before anything that quotes the address: a password in it must not reach the screen.
  if (urlHasCredentials(value)) throw usageError(`${source} must not carry a user name or password (user:password@host); pass the token with --token or SVC_TOKEN`);
  let parsed: URL | null = null;
  try {
    parsed = new URL(value);
  } catch {
    parsed = null;
  }
  if (!parsed || !['http:', 'https:'].includes(parsed.protocol)) throw usageError(`${source} must be an http:// or https:// URL, got "${value}"`);
  // The client appends /v1/<path>: a query or fragment would end up before it ("no route GET /").
  if (parsed.search || parsed.hash || value.includes('?') || value.includes('#')) {
    throw usageError(`${source} must be svcd's address without a query or fragment (http://host:port), got "${value}"`);
  }
  // fetch would refuse it on every request: said once, up front (a worker would otherwise fail every step).
  if (urlHasFetchBlockedPort(value)) throw usageError(`${source} "${value}": ${fetchBlockedPortHint(value)}`);
  // The API's prefix is the client's to add: `http://host:7401/v1` means the same daemon.
  return value.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/** The kernel address, checked (exit 2 when malformed). */
export function kernelUrlOf(cmd: Command): string {
  return checkedUrl(cmd, 'kernel');
}

/** The gateway address, checked (exit 2 when malformed). */
export function gatewayUrlOf(cmd: Command): string {
  return checkedUrl(cmd, 'gateway');
}

/** Seconds a request waits for svcd when neither --timeout nor SVC_TIMEOUT says. */
export const DEFAULT_TIMEOUT_SECONDS = 60;

/**
 * The same for the gateway: a tool call may run for as long as its connector's `timeout_ms`
 * allows (up to 600 s), and a client that gave up first would report a call still running.
 */
export const DEFAULT_GATEWAY_TIMEOUT_SECONDS = 660;

/**
 * --timeout / SVC_TIMEOUT in ms, undefined for 0 (no limit). Without one, a daemon (or another
 * program on its port) that accepts a connection and never answers would hang a script for good.
 */
export function timeoutMsOf(cmd: Command, defaultSeconds = DEFAULT_TIMEOUT_SECONDS): number | undefined {
  const flag = cmd.optsWithGlobals<Partial<GlobalOptions>>().timeout;
  const raw = flag ?? (process.env.SVC_TIMEOUT || undefined);
  if (raw === undefined) return defaultSeconds * 1000;
  const n = decimalOf(raw);
  if (n === null || n > 86_400) {
    throw usageError(`${flag !== undefined ? '--timeout' : 'SVC_TIMEOUT'} "${raw}" must be a number of seconds from 0 (no limit) to 86400`);
  }
  return n === 0 ? undefined : Math.max(1, Math.round(n * 1000));
}

export function kernelClient(cmd: Command): SvcHttpClient {
  const g = globals(cmd);
  return new SvcHttpClient({ baseUrl: kernelUrlOf(cmd), token: g.token, timeoutMs: timeoutMsOf(cmd) });
}

export function gatewayClient(cmd: Command): SvcHttpClient {
  const g = globals(cmd);
  return new SvcHttpClient({ baseUrl: gatewayUrlOf(cmd), token: g.token, timeoutMs: timeoutMsOf(cmd, DEFAULT_GATEWAY_TIMEOUT_SECONDS) });
}

/**
 * `--actor id:role` → {id, role}; usage error when missing or malformed. `approver`: the actor
 * decides approvals, so its role must be one a policy's approver `role:ROLE` can name.
 */
export function actorOf(cmd: Command, opts: { approver?: boolean } = {}): { id: string; role: string } {
  const raw = globals(cmd).actor;
  if (!raw) throw usageError('an actor is required: pass --actor ID:ROLE or set SVC_ACTOR');
  const source = cmd.optsWithGlobals<Partial<GlobalOptions>>().actor ? '--actor' : 'SVC_ACTOR';
  // A role has no colon (an approver is `role:<role>`), an id may: split at the last one.
  const i = raw.lastIndexOf(':');
  if (i <= 0 || i === raw.length - 1) throw usageError(`${source} must be ID:ROLE, got "${raw}"`);
  const id = raw.slice(0, i);
  const role = raw.slice(i + 1);
  // `fin-1:role:finance`: an approver is printed `role:finance`, so this is typed, and would
  // act as the id "fin-1:role". No one means that.
  if (/(^|:)role$/.test(id)) throw usageError(`${source} must be ID:ROLE, e.g. fin-1:${role}; "${raw}" would be the id "${id}" (an approver is shown as role:ROLE, an actor names the role alone)`);
  // No policy's approver can name such a role (svc-policy(5)): it could never decide. (An
  // abandon or a resume only records its actor, whose names svcd takes with spaces.)
  if (opts.approver && /\s/u.test(role)) throw usageError(`${source} "${raw}": a role holds no whitespace, as no approver role:ROLE in a policy can`);
  return { id, role };
}

/** Prints data: JSON with --json, otherwise the human form. */
export function output(cmd: Command, data: unknown, human?: (data: any) => string): void {
  if (globals(cmd).json || !human) {
    // --json prints the data as it is; without it, the JSON is for a terminal (terminalJson).
    process.stdout.write((globals(cmd).json ? JSON.stringify(data) : terminalJson(data)) + '\n');
    return;
  }
  let text: string;
  try {
    text = human(data);
  } catch (err) {
    // A 2xx JSON answer in another shape than svcd's: something else answers at that URL. With
    // SVC_LOG_LEVEL=debug the error goes on as it is, stack and all, in case the bug is ours.
    // (A TypeError reading a member that is not there; a RangeError formatting a time that is not one.)
    if ((err instanceof TypeError || err instanceof RangeError) && process.env.SVC_LOG_LEVEL !== 'debug') {
      throw new CliError(`the answer is not one svcd sends (${err.message}); is the URL svcd's? (SVC_LOG_LEVEL=debug shows where it failed)`, EXIT.failed);
    }
    throw err;
  }
  // Whatever the daemon stored (a policy's comments, a bundle's texts, a requester's name) is
  // shown, never acted on by the terminal: no escape sequence, no bidi reordering.
  process.stdout.write(cleanText(text).replace(/\n?$/, '\n'));
}

/** A plain table with left-aligned columns, as wide as the columns their text takes on a terminal (CJK and emoji two). */
export function table(headers: string[], rows: Array<Array<string | number | null | undefined>>): string {
  // Cells come from the daemon: `clean` keeps each on one line and lets no escape sequence through.
  const cells = [headers, ...rows.map((r) => r.map((c) => clean(c)))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => columns(r[i] ?? ''))));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : pad(c, widths[i]!))).join('  ')).join('\n');
}

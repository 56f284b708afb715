/**
 * The one HTTP transport of the CLI and the inbox TUI: JSON to svcd's kernel or gateway and
 * back. `exchange` answers every status and throws TransportError only when the daemon
 * cannot be reached (or, with a timeout, does not answer in time); each client maps that to
 * its own errors — SvcHttpClient to CliError (service errors exit 1, unreachable exit 3),
 * the TUI's ApprovalsApi to ApiError (TransportError passes through).
 */
import { CliError, EXIT } from './exit.js';
import { clean } from './terminal-text.js';
import { fetchBlockedPortHint } from '../src/util/fetch-blocked-ports.js';
import { isRecord } from '../src/util/is-record.js';
import { escapeRegExp } from '../src/util/escape-regexp.js';

/** The subset of `fetch` the clients use: the global fetch, or a fake in tests. */
export type FetchLike = (url: string, init: { method: string; headers: Record<string, string>; body?: string; signal?: AbortSignal }) => Promise<{
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}>;

export interface ClientOptions {
  /** The daemon's address, without /v1. */
  baseUrl: string;
  token?: string;
  /** Extra headers on every request (X-Svc-Lease, X-Svc-Remit). */
  headers?: Record<string, string>;
  /** Default: the global fetch. */
  fetch?: FetchLike;
  /** Per-request limit in ms, so a hung daemon reads as unreachable. (Default: none) */
  timeoutMs?: number;
}

export interface HttpResponse<T> {
  status: number;
  /** Parsed JSON; the text itself when it is not JSON; null for an empty body or 204. */
  body: T;
  headers: { get(name: string): string | null };
}

/** svcd could not be reached, or did not answer within the timeout. */
export class TransportError extends Error {
  constructor(
    readonly baseUrl: string,
    /** What went wrong: a system error code (ECONNREFUSED), or `timed out`. */
    readonly reason: string,
    /** The request's limit, when it had one. */
    readonly timeoutMs?: number,
    /** The request's method: one that changes something may have been carried out. */
    readonly method = 'GET',
  ) {
    super(`cannot reach svcd at ${baseUrl} (${reason})`);
    this.name = 'TransportError';
  }
}

/** The CLI's exit-3 error for a daemon it cannot reach. */
export function unreachable(err: TransportError): CliError {
  if (err.reason === 'bad port') return new CliError(`${err.message}: ${fetchBlockedPortHint(err.baseUrl)}`, EXIT.unreachable);
  if (err.reason === 'timed out' && err.timeoutMs !== undefined) {
    const within = `no answer from ${err.baseUrl} within ${err.timeoutMs / 1000} s`;
    const longer = '(--timeout or SVC_TIMEOUT waits longer, 0 for ever)';
    // A POST that got no answer may still have been carried out: a retry could do it twice.
    if (err.method !== 'GET') return new CliError(`${within}; it may still carry out the ${err.method}: look before repeating it ${longer}`, EXIT.unreachable);
    return new CliError(`${within}; is that svcd, and is it well? ${longer}`, EXIT.unreachable);
  }
  return new CliError(`${err.message}; is it running?`, EXIT.unreachable);
}

/** Sends one request and returns the answer, whatever its status. */
export async function exchange(opts: ClientOptions, method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<HttpResponse<unknown>> {
  const baseUrl = opts.baseUrl.replace(/\/+$/, '');
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers, ...extraHeaders };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const init: Parameters<FetchLike>[1] = { method, headers };
  if (body !== undefined) init.body = JSON.stringify(body);
  if (opts.timeoutMs !== undefined) init.signal = AbortSignal.timeout(opts.timeoutMs);
  const fetchFn = opts.fetch ?? (globalThis.fetch as unknown as FetchLike);
  let res: Awaited<ReturnType<FetchLike>>;
  let text: string;
  try {
    res = await fetchFn(`${baseUrl}/v1${path}`, init);
    text = await res.text();
  } catch (err) {
    throw new TransportError(baseUrl, describeFetchError(err), opts.timeoutMs, method);
  }
  let parsed: unknown = null;
  if (text && res.status !== 204) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

function describeFetchError(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return 'timed out';
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

/** The CLI's client: 2xx answers, or a CliError saying what svcd refused (exit 1) or that it is down (exit 3). */
export class SvcHttpClient {
  constructor(readonly opts: ClientOptions) {}

  /**
   * Sends a request; returns 2xx responses, throws CliError for the rest. `members`: what
   * svcd's answer always has; an object without them is from another server (one answering
   * 200 {} had `svc remit mint` print "undefined" as the token and exit 0).
   */
  async request<T = unknown>(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}, members: readonly string[] = []): Promise<HttpResponse<T>> {
    const res = await this.raw(method, path, body, extraHeaders);
    if (res.status >= 200 && res.status < 300) {
      // Every svcd answer the CLI asks for is JSON: an object, a list of objects (GET /tools),
      // or no body.
      if (res.status === 204 || isListOfObjects(res.body)) return res as HttpResponse<T>;
      if (isObject(res.body) && members.every((m) => Object.hasOwn(res.body as object, m))) return res as HttpResponse<T>;
      throw notSvcd(res.status, this.opts.baseUrl);
    }
    throw errorFromBody(res.status, res.body, this.opts.baseUrl);
  }

  /** Like request, but returns any status (callers that branch on 204/403/409). */
  async raw(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<HttpResponse<unknown>> {
    try {
      return await exchange(this.opts, method, path, body, extraHeaders);
    } catch (err) {
      if (err instanceof TransportError) throw unreachable(err);
      throw err;
    }
  }
}

/**
 * Turns a kernel (I 7.1) or gateway (I 7.2) error body into a one-line CliError. An answer in
 * neither shape comes from something that is not svcd (a web server, a proxy's error page):
 * it is named in one line, and its body is not carried to --json's stdout.
 */
export function errorFromBody(status: number, body: unknown, where?: string): CliError {
  const b = isObject(body) ? body : {};
  const refusal = isObject(b.refusal) && typeof b.refusal.reason === 'string' ? b.refusal : null;
  if (refusal) return new CliError(`refused (${String(refusal.reason)}): ${typeof refusal.detail === 'string' ? refusal.detail : ''}`.trim(), EXIT.failed, body);
  // Other servers answer with an `error` member too (`{"error": "Not Found"}`): svcd's has a
  // code and a message, both strings (interface 7.1).
  const error = isObject(b.error) && typeof b.error.code === 'string' && typeof b.error.message === 'string' ? b.error : null;
  if (error) {
    const detailsOf = isObject(error.details) ? error.details : {};
    const details = detailsText(String(error.message), detailsOf);
    // svcd's other listener (the gateway's URL as --kernel-url, or the other way round).
    const hint =
      error.code === 'not_found' && detailsOf.resource === 'route' && where
        ? `; is ${where} the right listener?`
        : error.code === 'unauthorized'
          ? '; pass the token svcd was started with as --token or SVC_TOKEN'
          : '';
    // Each line is made one line here: the lines after it are svc's own, and a newline in a
    // message or a member name (a path) must not forge another.
    return new CliError(`${clean(error.code)}: ${clean(error.message)}${details.inline}${hint}${details.lines}`, EXIT.failed, body);
  }
  return notSvcd(status, where);
}

/** Most problems a service error's details are printed as, one line each. */
const MAX_PROBLEM_LINES = 20;

/**
 * What of an error's `details` the one-line message does not already say. A member whose
 * value the message quotes (`not_found`'s resource and id, a path) is left out, and a list
 * of problems (`errors` of input_invalid and args_invalid, `problems` of bundle_invalid and
 * policy_invalid) becomes a line per problem after the message rather than a JSON blob;
 * what is left follows as JSON. `--json` prints the whole body on stdout.
 */
export function detailsText(message: string, details: Record<string, unknown>): { inline: string; lines: string } {
  const rest: Record<string, unknown> = {};
  let lines: string[] = [];
  for (const [key, value] of Object.entries(details)) {
    const problems = (key === 'errors' || key === 'problems') && Array.isArray(value) && value.every((p) => isObject(p) && typeof p.message === 'string') ? (value as Array<Record<string, unknown>>) : null;
    if (problems !== null) {
      // One problem is the one the message already states.
      if (problems.length > 1) lines = problems.slice(0, MAX_PROBLEM_LINES).map((p) => `  ${clean(problemPlace(p))}${clean(p.message)}`);
      if (problems.length > MAX_PROBLEM_LINES) lines.push(`  … and ${problems.length - MAX_PROBLEM_LINES} more (--json prints them all)`);
      continue;
    }
    if (saidIn(message, value)) continue;
    rest[key] = value;
  }
  return { inline: Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : '', lines: lines.length > 0 ? `\n${lines.join('\n')}` : '' };
}

/** `/path: ` or `line 2, column 5: ` for one problem of a details list. */
function problemPlace(p: Record<string, unknown>): string {
  if (typeof p.path === 'string') return `${p.path || '/'}: `;
  if (typeof p.line === 'number') return `line ${p.line}${typeof p.column === 'number' ? `, column ${p.column}` : ''}: `;
  return '';
}

/**
 * The message already quotes this value: an empty string, or a string or number standing on
 * its own in it (`run_x` in "run run_x not found"; not the `1` of `lse_1` or of `10`).
 */
function saidIn(message: string, value: unknown): boolean {
  if (value === '') return true;
  if (typeof value !== 'string' && typeof value !== 'number') return false;
  const text = escapeRegExp(String(value));
  return new RegExp(`(^|[^\\w.])${text}($|[^\\w])`).test(message);
}

/** What an answer from something that is not svcd is called (the CLI and the inbox). */
export function notSvcdMessage(status: number, where?: string): string {
  return `HTTP ${status}${where ? ` from ${where}` : ''} is not an svcd answer; is the URL svcd's?`;
}

export function notSvcd(status: number, where?: string): CliError {
  return new CliError(notSvcdMessage(status, where), EXIT.failed);
}

/** svcd's list answers are arrays of objects; `[1, 2, 3]` comes from something else. */
export function isListOfObjects(v: unknown): v is Array<Record<string, unknown>> {
  return Array.isArray(v) && v.every(isObject);
}

/** As src/util/is-record.ts, under the name the CLI's modules import. */
export const isObject = isRecord;

/**
 * JSON over HTTP for the worker's two peers. A connection failure, or no answer within the
 * request's timeout, is a non-deterministic `network_error`; an abort rethrows the signal's
 * reason so the step stops for the right cause.
 */
import { abortReason, StepError } from './errors.js';
import { wellFormedJson } from '../encoding/well-formed-json.js';
import { fetchBlockedPortHint } from '../util/fetch-blocked-ports.js';
import { withoutCredentials } from '../util/url-credentials.js';

export interface JsonResponse {
  status: number;
  body: any;
  headers: Headers;
}

export interface PeerOptions {
  /** Base address, e.g. http://127.0.0.1:7401 (the `/v1` prefix is added). */
  baseUrl: string;
  /** Bearer token sent when set (SVC_TOKEN). (Default: none) */
  token?: string;
  /** fetch to use (tests). (Default: global fetch) */
  fetch?: typeof fetch;
}

// Where a URL's credentials are found and taken out of text (the worker's peers quote URLs).
export { urlHasCredentials, withoutCredentials } from '../util/url-credentials.js';

/** A peer that could not be reached: `reason` is the system's code (ECONNREFUSED) or fetch's words. */
export class UnreachableError extends StepError {
  constructor(
    baseUrl: string,
    readonly reason: string,
  ) {
    super('network_error', withoutCredentials(`cannot reach ${baseUrl} (${reason})${reason === 'bad port' ? `: ${fetchBlockedPortHint(baseUrl)}` : ''}`));
  }

  /** Whether asking again can help: not for a port fetch refuses outright (a configuration mistake). */
  get mayRecover(): boolean {
    return this.reason !== 'bad port';
  }
}

/**
 * Sends one JSON request and parses the JSON answer; never throws for an HTTP status.
 * `timeoutMs` bounds the whole exchange, answer read included: a peer that takes the
 * connection and never answers is then an UnreachableError like one that refuses it, instead
 * of a wait for the HTTP client's own limits (minutes). (Default: none)
 */
export async function requestJson(
  peer: PeerOptions,
  method: string,
  path: string,
  body?: unknown,
  opts: { headers?: Record<string, string>; signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<JsonResponse> {
  const url = peer.baseUrl.replace(/\/+$/, '') + '/v1' + path;
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (peer.token) headers.authorization = `Bearer ${peer.token}`;
  const limit = opts.timeoutMs !== undefined && opts.timeoutMs > 0 && Number.isFinite(opts.timeoutMs) ? opts.timeoutMs : null;
  const timer = limit === null ? null : new AbortController();
  const timeout = timer && setTimeout(() => timer.abort(), limit!);
  const signal = timer ? (opts.signal ? AbortSignal.any([opts.signal, timer.signal]) : timer.signal) : opts.signal;
  /** The caller's abort as its reason, our own timeout as a peer that did not answer; null otherwise. */
  const abortedOrTimedOut = (): Error | null => {
    if (opts.signal?.aborted) return abortReason(opts.signal);
    if (timer?.signal.aborted) return new UnreachableError(peer.baseUrl, `no answer within ${limit} ms`);
    return null;
  };
  try {
    let res: Response;
    try {
      res = await (peer.fetch ?? fetch)(url, {
        method,
        headers,
        body: body === undefined ? undefined : wellFormedJson(body),
        signal,
      });
    } catch (err) {
      const stopped = abortedOrTimedOut();
      if (stopped) throw stopped;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new UnreachableError(peer.baseUrl, cause?.code ?? cause?.message ?? (err as Error).message);
    }
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      const stopped = abortedOrTimedOut();
      if (stopped) throw stopped;
      throw new StepError('network_error', withoutCredentials(`reading the answer of ${peer.baseUrl} failed: ${(err as Error).message}`));
    }
    let parsed: unknown = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    return { status: res.status, body: parsed, headers: res.headers };
  } finally {
    if (timeout) clearTimeout(timeout);
  }
}

/** The `{error: {code, message}}` of a kernel or gateway answer, when there is one. */
export function errorOf(body: unknown): { code: string; message: string; details?: unknown } | null {
  const e = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  if (e && typeof e === 'object' && typeof e.code === 'string') {
    return { code: e.code, message: typeof e.message === 'string' ? e.message : '', details: e.details };
  }
  return null;
}

/** `Retry-After` as ms: seconds (`2`, `0.5`), or an HTTP date (`Wed, 21 Oct 2026 07:28:00 GMT`); null when absent or unreadable. */
export function parseRetryAfter(header: string | null, now = Date.now()): number | null {
  const value = header?.trim() ?? '';
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  if (!/^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(value)) return null;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/**
 * A small HTTP client for the kernel and the gateway. Service errors become CliError with
 * exit 1 and the envelope's code; a connection failure becomes exit 3 naming the URL.
 */
import { CliError, EXIT } from './exit.js';

export interface ClientOptions {
  baseUrl: string;
  token?: string;
  /** Extra headers on every request (X-Svc-Lease, X-Svc-Remit). */
  headers?: Record<string, string>;
}

export interface HttpResponse<T> {
  status: number;
  body: T;
  headers: Headers;
}

export class SvcHttpClient {
  constructor(readonly opts: ClientOptions) {}

  /** Sends a request; returns 2xx responses, throws CliError for the rest. */
  async request<T = unknown>(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<HttpResponse<T>> {
    const res = await this.raw(method, path, body, extraHeaders);
    if (res.status >= 200 && res.status < 300) return res as HttpResponse<T>;
    throw errorFromBody(res.status, res.body);
  }

  /** Like request, but returns any status (callers that branch on 204/403/409). */
  async raw(method: string, path: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<HttpResponse<unknown>> {
    const url = this.opts.baseUrl.replace(/\/+$/, '') + '/v1' + path;
    const headers: Record<string, string> = { ...this.opts.headers, ...extraHeaders };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    let res: Response;
    try {
      res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(`cannot reach svcd at ${this.opts.baseUrl} (${cause?.code ?? cause?.message ?? (err as Error).message}); is it running?`, EXIT.unreachable);
    }
    const text = await res.text();
    let parsed: unknown = text;
    if (text && (res.headers.get('content-type') ?? '').includes('json')) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    return { status: res.status, body: res.status === 204 ? null : parsed, headers: res.headers };
  }
}

/** Turns a kernel (I 7.1) or gateway (I 7.2) error body into a one-line CliError. */
export function errorFromBody(status: number, body: unknown): CliError {
  const b = body as { error?: { code?: string; message?: string; details?: Record<string, unknown> }; refusal?: { reason?: string; detail?: string } } | null;
  if (b?.refusal) return new CliError(`refused (${b.refusal.reason}): ${b.refusal.detail ?? ''}`.trim(), EXIT.failed, body);
  if (b?.error) {
    const details = b.error.details && Object.keys(b.error.details).length ? ` ${JSON.stringify(b.error.details)}` : '';
    return new CliError(`${b.error.code}: ${b.error.message ?? ''}${details}`, EXIT.failed, body);
  }
  return new CliError(`HTTP ${status}: ${typeof body === 'string' ? body.slice(0, 200) : JSON.stringify(body)}`, EXIT.failed, body);
}

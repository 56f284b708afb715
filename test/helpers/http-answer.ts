/**
 * One HTTP exchange with svcd as a black-box test sees it (the spec-letter suites): status,
 * headers, the text, and the body parsed when it is JSON (the text itself otherwise: metrics).
 */
import { expect } from 'vitest';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

/** `base` + `/v1` + `path`; a body is sent as JSON (POST unless `method` says) unless it is already a string. */
export async function request(base: string, path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(init.headers ?? {}) };
  if (init.body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(`${base}/v1${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers,
    body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: the text
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** I 7.1: `{error: {code, message, details}}` with the given status and code; returns the details. */
export function expectError(a: Answer, status: number, code: string): any {
  expect({ status: a.status, code: a.body?.error?.code }).toEqual({ status, code });
  expect(a.body).toEqual({ error: { code, message: expect.any(String), details: expect.any(Object) } });
  return a.body.error.details;
}

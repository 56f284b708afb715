/**
 * Gateway test harness: a real Gateway and its real fastify app on 127.0.0.1:0 with a temp
 * data dir, a kernel link that trusts a test signer and records every event it is asked to
 * append, and small fetch helpers.
 */
import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp } from '../../daemon/gateway/app.js';
import type { Clock } from '../../src/clock.js';
import { loadGatewayConfig } from '../../src/gateway/config.js';
import { Gateway, type GatewayOptions } from '../../src/gateway/gateway.js';
import type { EventCredential, GatewayEvent, KernelLink } from '../../src/gateway/kernel-link.js';
import { SvcError } from '../../src/errors.js';
import { Writable } from 'node:stream';
import { createLogger, Redactor, silentLogger, type Logger } from '../../src/log/logger.js';
import type { TrustedKeys } from '../../src/types.js';
import { tempDir } from '../helpers/daemon.js';

export interface RecordedEvent extends GatewayEvent {
  runId: string;
  /** The credential the kernel accepted the event with. */
  cred: EventCredential;
  /** Credentials tried before it and refused (see `refuses`). */
  refused: EventCredential[];
}

/**
 * A KernelLink that trusts `keys` and records events instead of sending them. `refuses`
 * plays the kernel's credential check: a credential it returns true for is refused as the
 * kernel would (credential_invalid), so the gateway's fallback can be observed.
 */
export class RecordingLink implements KernelLink {
  readonly events: RecordedEvent[] = [];
  refuses: (runId: string, cred: EventCredential) => boolean = () => false;
  private tried: EventCredential[] = [];
  constructor(public keys: TrustedKeys) {}
  async trustedKeys(): Promise<TrustedKeys> {
    return this.keys;
  }
  async appendEvent(runId: string, ev: GatewayEvent, cred: EventCredential): Promise<void> {
    if (this.refuses(runId, cred)) {
      this.tried.push(cred);
      throw new SvcError('credential_invalid', 'refused by the test link', {});
    }
    this.events.push({ runId, ...ev, cred, refused: this.tried });
    this.tried = [];
  }
  /** Events of one kind, oldest first. */
  of(kind: string): RecordedEvent[] {
    return this.events.filter((e) => e.kind === kind);
  }
}

export interface TestGateway extends AsyncDisposable {
  gateway: Gateway;
  app: FastifyInstance;
  url: string;
  dataDir: string;
  link: RecordingLink;
  req(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers; text: string }>;
  call(body: Record<string, unknown>): Promise<{ status: number; body: any; headers: Headers; text: string }>;
  metrics(): Promise<string>;
  close(): Promise<void>;
}

export interface StartOptions extends Partial<Omit<GatewayOptions, 'config' | 'link'>> {
  /** The gateway config document (interface 2.10). */
  doc?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  keys: TrustedKeys;
  dataDir?: string;
  token?: string | null;
  clock?: Clock;
  logger?: Logger;
  redactor?: Redactor;
  baseDir?: string;
}

export async function startGateway(opts: StartOptions): Promise<TestGateway> {
  const dataDir = opts.dataDir ?? tempDir('svc-gw-');
  const redactor = opts.redactor ?? new Redactor();
  const config = loadGatewayConfig({ data_dir: dataDir, ...(opts.doc ?? {}) }, { env: opts.env ?? {}, redactor, baseDir: opts.baseDir });
  if (opts.token !== undefined) config.token = opts.token;
  const link = new RecordingLink(opts.keys);
  const { doc: _d, env: _e, keys: _k, dataDir: _dd, token: _t, baseDir: _b, ...rest } = opts;
  const gateway = await Gateway.open({ canaryLoop: false, logger: silentLogger, ...rest, redactor, config, link });
  const app = await buildGatewayApp(gateway, { token: config.token, logger: opts.logger ?? silentLogger, redactor });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const req = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const h: Record<string, string> = { ...headers };
    if (body !== undefined) h['content-type'] = 'application/json';
    if (config.token && !h.authorization) h.authorization = `Bearer ${config.token}`;
    const res = await fetch(`${url}/v1${path}`, { method, headers: h, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* metrics */
    }
    return { status: res.status, body: parsed as any, headers: res.headers, text };
  };
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await app.close();
    await gateway.close();
    if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
  };
  return {
    gateway,
    app,
    url,
    dataDir,
    link,
    req,
    call: (body) => req('POST', '/tools/call', body),
    metrics: async () => (await req('GET', '/metrics')).text,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** The value of a Prometheus sample line, or 0 when it is absent. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (.+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got: Record<string, string> = {};
    for (const pair of (m[3] ?? '').match(/[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"/g) ?? []) {
      const i = pair.indexOf('=');
      got[pair.slice(0, i)] = JSON.parse(pair.slice(i + 1)) as string;
    }
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[4]);
  }
  return 0;
}

/** A debug-level logger (through `redactor`, when given) whose output the test can read. */
export function capturedLogger(redactor?: Redactor): { logger: Logger; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _e, cb) {
      text += chunk.toString();
      cb();
    },
  });
  return { logger: createLogger({ stream, redactor, level: 'debug' }), text: () => text };
}

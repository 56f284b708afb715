/**
 * Small node:http servers that speak the kernel's worker endpoints (interface 4.1), the
 * gateway's tool endpoints (interface 4.2) and the OpenAI chat-completions API, recording every
 * request. They let the worker be tested against the contract without the real daemon.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Lease, PriorEvent } from '../../src/worker/types.js';

export interface Recorded {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
  at: number;
}

type Reply = { status: number; body?: unknown; headers?: Record<string, string> };
type Handler = (req: Recorded, res: ServerResponse) => Promise<Reply | null> | Reply | null;

async function readBody(req: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A JSON HTTP server on 127.0.0.1:0 that records requests and answers through `handle`. */
export class FakeServer implements AsyncDisposable {
  readonly requests: Recorded[] = [];
  /** Requests whose client hung up before the answer was written. */
  readonly abandoned: Recorded[] = [];
  private server: Server;
  url = '';

  constructor(private handle: Handler) {
    this.server = createServer((req, res) => {
      void (async () => {
        const rec: Recorded = { method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body: await readBody(req), at: Date.now() };
        this.requests.push(rec);
        res.on('close', () => {
          if (!res.writableEnded) this.abandoned.push(rec);
        });
        let reply: Reply | null;
        try {
          reply = await this.handle(rec, res);
        } catch (err) {
          reply = { status: 500, body: { error: { code: 'internal', message: String(err) } } };
        }
        if (reply === null || res.writableEnded || res.destroyed) return;
        if (reply.body === undefined) {
          res.writeHead(reply.status, reply.headers ?? {});
          res.end();
        } else {
          res.writeHead(reply.status, { 'content-type': 'application/json', ...(reply.headers ?? {}) });
          res.end(JSON.stringify(reply.body));
        }
      })();
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  calls(method: string, pathPrefix: string): Recorded[] {
    return this.requests.filter((r) => r.method === method && r.path.startsWith(pathPrefix));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

// ---------------------------------------------------------------- kernel

export type ActionDecider = (action: { tool: string; args: Record<string, unknown>; summary: string }, lease: Lease) => Reply;

/** The kernel side of leases (interface 2.6, 4.1; decisions §6, §7). */
export class FakeKernel extends FakeServer {
  private queue: Lease[] = [];
  private waiters: Array<() => void> = [];
  /** Leases answered 410 from now on (released or parked). */
  readonly gone = new Set<string>();
  /** Every lease handed out, by id. */
  readonly leases = new Map<string, Lease>();
  /** Events per run, as the kernel would keep them (only those the worker posts, plus `extra`). */
  readonly events = new Map<string, PriorEvent[]>();
  decide: ActionDecider = () => ({ status: 200, body: { action_id: 'act_1', decision: 'allow', rule: 'default/allow', approval_id: null } });
  completeReply: (lease: Lease, body: any) => Reply = () => ({ status: 200, body: { run_state: 'completed', next_step: null } });
  heartbeatReply: (leaseId: string) => Reply | null = () => null;
  private seq = 0;

  constructor() {
    super((req, res) => this.route(req, res));
  }

  /** Makes a lease available to the next POST /v1/leases. */
  offer(lease: Lease): void {
    this.queue.push(lease);
    const w = this.waiters;
    this.waiters = [];
    w.forEach((f) => f());
  }

  /** Appends a kernel-side event (e.g. step.failed) to a run's log. */
  append(runId: string, kind: string, payload: Record<string, unknown>): void {
    const list = this.events.get(runId) ?? [];
    list.push({ seq: ++this.seq, kind, payload, actor: 'kernel', at: new Date().toISOString() });
    this.events.set(runId, list);
  }

  eventsOf(runId: string, kind?: string): PriorEvent[] {
    return (this.events.get(runId) ?? []).filter((e) => kind === undefined || e.kind === kind);
  }

  private async route(req: Recorded, res?: ServerResponse): Promise<Reply | null> {
    const m = /^\/v1\/leases\/([^/]+)\/(heartbeat|complete|fail|actions)$/.exec(req.path);
    if (req.method === 'POST' && req.path === '/v1/leases') return this.leaseRoute(req, res);
    if (m) {
      const [, id, op] = m as unknown as [string, string, string];
      const lease = this.leases.get(id);
      if (!lease) return { status: 404, body: { error: { code: 'not_found', message: 'no lease', details: {} } } };
      if (this.gone.has(id)) return { status: 410, body: { error: { code: 'lease_expired', message: 'lease expired', details: {} } } };
      switch (op) {
        case 'heartbeat':
          return this.heartbeatReply(id) ?? { status: 200, body: { expires_at: new Date(Date.now() + 60_000).toISOString() } };
        case 'complete': {
          const r = this.completeReply(lease, req.body);
          if (r.status === 200) this.gone.add(id);
          return r;
        }
        case 'fail':
          this.gone.add(id);
          this.append(lease.run_id, 'step.failed', { step: lease.step, kind: lease.kind ?? lease.step_def.kind, lease_id: id, error: req.body?.error, deterministic: req.body?.deterministic, usage: req.body?.usage });
          return { status: 200, body: { outcome: req.body?.deterministic ? 'quarantined' : 'retry_scheduled', delay_ms: req.body?.deterministic ? 0 : 1000 } };
        case 'actions': {
          const r = this.decide(req.body?.action, lease);
          if (r.status === 200 && (r.body as { decision?: string })?.decision === 'approval_required') this.gone.add(id);
          return r;
        }
      }
    }
    const read = /^\/v1\/runs\/([^/?]+)\/events\?(.*)$/.exec(req.path);
    if (req.method === 'GET' && read) {
      const q = new URLSearchParams(read[2]);
      const from = Number(q.get('from_seq') ?? 1);
      const page = (this.events.get(read[1]!) ?? []).filter((e) => e.seq >= from).slice(0, Number(q.get('limit') ?? 100));
      return { status: 200, body: { events: page, next_seq: page.length > 0 ? page[page.length - 1]!.seq + 1 : from } };
    }
    const ev = /^\/v1\/runs\/([^/]+)\/events$/.exec(req.path);
    if (req.method === 'POST' && ev) {
      const leaseId = req.headers['x-svc-lease'];
      if (typeof leaseId !== 'string' || !this.leases.has(leaseId)) return { status: 401, body: { error: { code: 'credential_required', message: 'X-Svc-Lease', details: {} } } };
      if (this.gone.has(leaseId)) return { status: 410, body: { error: { code: 'lease_expired', message: 'lease expired', details: {} } } };
      this.append(ev[1]!, req.body.kind, req.body.payload);
      return { status: 201, body: { seq: this.seq, hash: 'h' + this.seq } };
    }
    return { status: 404, body: { error: { code: 'not_found', message: req.path, details: {} } } };
  }

  private async leaseRoute(req: Recorded, res?: ServerResponse): Promise<Reply | null> {
    const kinds: string[] = req.body?.kinds ?? [];
    const deadline = Date.now() + Math.min(2, Number(req.body?.wait_seconds ?? 0)) * 1000;
    // As the kernel does: a long poll whose client went away is handed nothing (its lease
    // would be released unspent).
    let gone = false;
    res?.on('close', () => (gone = !res.writableEnded));
    for (;;) {
      if (gone) return null;
      const i = this.queue.findIndex((l) => kinds.includes(l.kind ?? String(l.step_def.kind)));
      if (i >= 0) {
        const lease = this.queue.splice(i, 1)[0]!;
        this.leases.set(lease.lease_id, lease);
        return { status: 200, body: lease };
      }
      const left = deadline - Date.now();
      if (left <= 0) return { status: 204 };
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }
}

let leaseCounter = 0;

/** A lease as the kernel would hand it out, with sensible defaults. */
export function makeLease(over: Partial<Lease> & { step_def: Lease['step_def'] }, ctx: Partial<Lease['context']> = {}): Lease {
  leaseCounter += 1;
  const run_id = over.run_id ?? 'run_TEST';
  return {
    lease_id: `lse_${leaseCounter}_${Math.random().toString(36).slice(2, 8)}`,
    run_id,
    step: over.step ?? String(over.step_def.id ?? 'step'),
    attempt: 1,
    expires_at: new Date(Date.now() + 60_000).toISOString(),
    heartbeat_seconds: 20,
    ...over,
    context: {
      input: {},
      steps: {},
      run: { id: run_id, bundle: 'refunds', workflow: 'refund', department: 'support' },
      remit_token: 'krt1.cp-test.payload.sig',
      remit: { autonomy: 'supervised', grants: [], tools: ['billing.*'], scopes: ['sql:table:*'] },
      prompts: {},
      mock: {},
      tools: {},
      pacing: {},
      approved_actions: [],
      prior_events: [],
      ...ctx,
    },
  };
}

// ---------------------------------------------------------------- gateway

export type ToolImpl = (args: Record<string, any>, req: Recorded) => Promise<Reply | unknown> | Reply | unknown;

function isReply(v: unknown): v is Reply {
  return v !== null && typeof v === 'object' && typeof (v as Reply).status === 'number' && Object.keys(v as object).every((k) => ['status', 'body', 'headers'].includes(k));
}

/**
 * The URL of a gateway that answers (a FakeGateway closed by `cleanups`), for tests whose
 * gateway does not matter: a worker whose gateway cannot be reached at its start takes no
 * step until it can (svc-worker(1) DESCRIPTION).
 */
export async function answeringGatewayUrl(cleanups: Array<() => Promise<void>>): Promise<string> {
  const g = await new FakeGateway().start();
  cleanups.push(() => g.close());
  return g.url;
}

/**
 * A fetch for `gateway` that refuses (ECONNREFUSED) the requests `refuse` picks, counting
 * them, and passes the rest: a gateway that answers its health probe but whose calls are cut.
 */
export function refusingFetch(refuse: (url: string) => boolean): { fetch: typeof fetch; refused: () => number } {
  let refused = 0;
  const f: typeof fetch = (url, init) => {
    if (!refuse(String(url))) return fetch(url, init);
    refused += 1;
    return Promise.reject(new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } }));
  };
  return { fetch: f, refused: () => refused };
}

/** The gateway's /tools and /tools/call (interface 4.2, 7.2; decisions §9 idempotency). */
export class FakeGateway extends FakeServer {
  readonly tools = new Map<string, { descriptor: Record<string, unknown>; impl: ToolImpl }>();
  /** Real executions per tool (idempotent replays not counted). */
  readonly executions = new Map<string, number>();
  private store = new Map<string, { argsHash: string; result: unknown }>();
  quarantined = new Set<string>();

  constructor() {
    super((req) => this.route(req));
  }

  define(id: string, impl: ToolImpl, descriptor: Record<string, unknown> = {}): this {
    const connector = id.split('.')[0]!;
    this.tools.set(id, { impl, descriptor: { id, connector, description: `${id} tool`, writes: false, input_schema: { type: 'object' }, scope_derivation: 'table', contract: { required: {} }, ...descriptor } });
    return this;
  }

  toolCalls(tool?: string): Recorded[] {
    return this.calls('POST', '/v1/tools/call').filter((r) => tool === undefined || r.body?.tool === tool);
  }

  private async route(req: Recorded): Promise<Reply> {
    if (req.method === 'GET' && req.path === '/v1/health') return { status: 200, body: { ok: true } };
    if (req.method === 'GET' && req.path === '/v1/tools') return { status: 200, body: [...this.tools.values()].map((t) => t.descriptor) };
    if (req.method === 'POST' && req.path === '/v1/tools/call') {
      const { tool, args, idempotency_key } = req.body ?? {};
      const t = this.tools.get(tool);
      if (!t) return { status: 404, body: { ok: false, error: { code: 'tool_not_found', message: tool, details: {} } } };
      const argsHash = JSON.stringify(args);
      const key = `${tool}\u0000${idempotency_key}`;
      const stored = idempotency_key ? this.store.get(key) : undefined;
      if (stored) {
        if (stored.argsHash !== argsHash) return { status: 409, body: { ok: false, error: { code: 'idempotency_conflict', message: 'different args', details: {} } } };
        return { status: 200, body: { ok: true, result: stored.result, scope: 'sql:table:x', scopes: ['sql:table:x'], replayed: true, latency_ms: 0 } };
      }
      if (this.quarantined.has(String(tool).split('.')[0]!)) return { status: 503, body: { ok: false, error: { code: 'connector_quarantined', message: 'quarantined', details: {} } } };
      this.executions.set(tool, (this.executions.get(tool) ?? 0) + 1);
      const out = await t.impl(args ?? {}, req);
      if (isReply(out)) return out;
      if (idempotency_key) this.store.set(key, { argsHash, result: out });
      return { status: 200, body: { ok: true, result: out, scope: 'sql:table:x', scopes: ['sql:table:x'], replayed: false, latency_ms: 1 } };
    }
    return { status: 404, body: { ok: false, error: { code: 'not_found', message: req.path, details: {} } } };
  }
}

// ---------------------------------------------------------------- OpenAI-compatible provider

export type ChatScript = (body: any, n: number) => Reply | Record<string, unknown>;

/** Speaks POST /v1/chat/completions; `script` answers the n-th request (0-based). */
export class FakeOpenAi extends FakeServer {
  constructor(script: ChatScript) {
    let n = 0;
    super((req) => {
      if (req.method !== 'POST' || req.path !== '/v1/chat/completions') return { status: 404, body: { error: { message: 'no route' } } };
      const out = script(req.body, n++);
      return isReply(out) ? out : { status: 200, body: out };
    });
  }

  /** Everything the provider was sent, as one string (for "never received" assertions). */
  sentText(): string {
    return this.requests.map((r) => JSON.stringify(r.body)).join('\n');
  }
}

/** A chat-completions answer with tool calls or final content. */
export function chatAnswer(opts: { content?: string | null; toolCalls?: Array<{ id: string; name: string; args: unknown }>; prompt?: number; completion?: number }): Record<string, unknown> {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    model: 'fake-model',
    choices: [
      {
        index: 0,
        finish_reason: opts.toolCalls?.length ? 'tool_calls' : 'stop',
        message: {
          role: 'assistant',
          content: opts.content ?? null,
          ...(opts.toolCalls?.length ? { tool_calls: opts.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.args) } })) } : {}),
        },
      },
    ],
    usage: { prompt_tokens: opts.prompt ?? 10, completion_tokens: opts.completion ?? 5, total_tokens: (opts.prompt ?? 10) + (opts.completion ?? 5) },
  };
}

/** Resolves when `pred` holds, polling every 10 ms (fails after `ms`). */
export async function until(pred: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * An in-memory stand-in for the kernel's approvals API (interface 4.1, decisions 5.4, §6, §7),
 * reachable as a fetch function (for the data layer and the TUI) or as a real local HTTP
 * server (for the built CLI). It follows the documented shapes; the live tests run the real one.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { vi } from 'vitest';
import type { Actor, Approval, EventView, FetchLike, RunView } from '../../cli/tui/approvals-api.js';
import type { InboxProps } from '../../cli/tui/Inbox.js';

export function approval(n: number, over: Partial<Approval> = {}): Approval {
  const id = `apr_01JTEST${String(n).padStart(18, '0')}`;
  return {
    approval_id: id,
    run_id: `run_01JTEST${String(n).padStart(18, '0')}`,
    step: 'refund',
    action_id: `act_${String(n).padStart(26, '0')}`,
    action: { tool: 'billing.refund', args: { invoice_id: `INV-${n}`, amount: 100 + n }, summary: `Refund ${100 + n} USD on INV-${n}`, writes: true, system_of_record: true },
    rule: 'refunds/large_refund',
    approver: 'role:finance',
    state: 'pending',
    created_at: new Date(Date.UTC(2026, 0, 1, 10, n, 0)).toISOString(),
    decided_at: null,
    decision: null,
    actor: null,
    reason: null,
    ...over,
  };
}

export function runOf(a: Approval, over: Partial<RunView> = {}): RunView {
  return {
    run_id: a.run_id,
    state: 'parked',
    parked_reason: 'human',
    bundle: { name: 'refunds', version: '1.2.0' },
    workflow: 'refund',
    department: 'support',
    requested_by: { id: 'alice', role: 'support', manager: 'finance' },
    usage: { tokens: 1200, usd: 0.12 },
    budget: { tokens: 10000, usd: 5 },
    last_seq: 6,
    ...over,
  } as RunView;
}

export function eventsOf(): EventView[] {
  const kinds = ['run.created', 'step.leased', 'step.completed', 'step.leased', 'action.decided', 'approval.requested'];
  return kinds.map((kind, i) => ({ seq: i + 1, kind }));
}

export interface FakeCall {
  method: string;
  path: string;
  query: Record<string, string>;
  body: unknown;
  headers: Record<string, string>;
}

/** What a POST /approvals/{id} does instead of deciding (to stage a race or a refusal). */
export type DecideHook = (id: string, body: { decision: string; actor: Actor; reason: string }) => { status: number; body: unknown } | null;

export class FakeKernel {
  approvals = new Map<string, Approval>();
  runs = new Map<string, RunView>();
  events = new Map<string, EventView[]>();
  calls: FakeCall[] = [];
  /** When true, every request fails like a refused connection. */
  down = false;
  /** When true, a POST is recorded (it reaches svcd) but its answer never comes: the caller times out. */
  silentAfterPost = false;
  /** Events a page holds at most whatever the `limit`, as svcd's byte bound on event pages does. */
  eventPageCap = Infinity;
  /** Page size the fake enforces regardless of `limit`, to exercise pagination. */
  pageSize = 100;
  onDecide: DecideHook | null = null;
  token: string | null = null;

  add(a: Approval, run: RunView = runOf(a), events: EventView[] = eventsOf()): Approval {
    this.approvals.set(a.approval_id, a);
    this.runs.set(a.run_id, run);
    this.events.set(a.run_id, events);
    return a;
  }

  /** Decides as someone else (the other side of a race). */
  decideAs(id: string, decision: 'approved' | 'rejected', actor: Actor, reason: string, at = '2026-01-01T11:00:00.000Z'): void {
    const a = this.approvals.get(id)!;
    this.approvals.set(id, { ...a, state: decision, decision, actor, reason, decided_at: at });
  }

  handle(method: string, url: string, headers: Record<string, string>, body: unknown): { status: number; body: unknown } {
    const u = new URL(url, 'http://fake');
    const path = u.pathname.replace(/^\/v1/, '');
    const query = Object.fromEntries(u.searchParams);
    this.calls.push({ method, path, query, body, headers });
    const err = (status: number, code: string, message: string, details: Record<string, unknown> = {}) => ({ status, body: { error: { code, message, details } } });
    if (this.token && headers.authorization !== `Bearer ${this.token}`) return err(401, 'unauthorized', 'missing or wrong bearer token');
    let m: RegExpMatchArray | null;
    if (method === 'GET' && path === '/approvals') {
      let list = [...this.approvals.values()].sort((a, b) => (a.approval_id < b.approval_id ? 1 : -1));
      if (query.state) list = list.filter((a) => a.state === query.state);
      if (query.approver) list = list.filter((a) => a.approver === query.approver);
      if (query.after) list = list.filter((a) => a.approval_id < query.after!);
      const limit = Math.min(Number(query.limit ?? 50), this.pageSize);
      const page = list.slice(0, limit);
      return { status: 200, body: { approvals: page, next: list.length > limit ? page[page.length - 1]!.approval_id : null } };
    }
    if ((m = path.match(/^\/approvals\/([^/]+)$/))) {
      const id = decodeURIComponent(m[1]!);
      const a = this.approvals.get(id);
      if (!a) return err(404, 'not_found', `approval ${id} not found`, { resource: 'approval', id });
      if (method === 'GET') return { status: 200, body: a };
      const b = body as { decision: 'approved' | 'rejected'; actor: Actor; reason: string };
      const hooked = this.onDecide?.(id, b);
      if (hooked) return hooked;
      // The kernel's order (src/kernel/approvals.ts): cancelled, decided, role, self-approval.
      const now = this.approvals.get(id)!;
      if (now.state === 'cancelled') return err(409, 'invalid_state', `approval ${id} was cancelled when run ${now.run_id} ended (abandoned) before a decision`, { approval_id: id, state: 'cancelled', run_state: 'abandoned' });
      if (now.state !== 'pending') return err(409, 'already_decided', `approval ${id} is already ${now.state}`, { approval_id: id, state: now.state });
      if (`role:${b.actor.role}` !== now.approver) return err(403, 'not_the_approver', `approval ${id} is for ${now.approver}; ${b.actor.id} acts as role:${b.actor.role}`);
      if (this.runs.get(now.run_id)?.requested_by.id === b.actor.id) {
        return err(403, 'not_the_approver', `${b.actor.id} requested run ${now.run_id} and cannot approve its actions`, { reason: 'self_approval' });
      }
      this.decideAs(id, b.decision, b.actor, b.reason, '2026-01-01T10:59:00.000Z');
      const run = this.runs.get(now.run_id);
      if (run) this.runs.set(now.run_id, { ...run, state: 'running', parked_reason: null });
      return { status: 200, body: { run_id: now.run_id, run_state: 'running' } };
    }
    if (method === 'GET' && (m = path.match(/^\/runs\/([^/]+)$/))) {
      const r = this.runs.get(decodeURIComponent(m[1]!));
      return r ? { status: 200, body: r } : err(404, 'not_found', 'run not found', { resource: 'run', id: m[1] });
    }
    if (method === 'GET' && (m = path.match(/^\/runs\/([^/]+)\/events$/))) {
      const evs = this.events.get(decodeURIComponent(m[1]!));
      if (!evs) return err(404, 'not_found', 'run not found', { resource: 'run', id: m[1] });
      const from = Number(query.from_seq ?? 1);
      const limit = Math.min(Number(query.limit ?? 100), this.eventPageCap);
      const page = evs.filter((e) => e.seq >= from).slice(0, limit);
      return { status: 200, body: { events: page, next_seq: page.length ? page[page.length - 1]!.seq + 1 : from } };
    }
    return err(404, 'not_found', `no route ${method} ${path}`);
  }

  /** This fake as a fetch function. */
  fetch: FetchLike = async (url, init) => {
    if (this.down) throw new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } });
    const res = this.handle(init.method, url, init.headers, init.body ? JSON.parse(init.body) : undefined);
    if (this.silentAfterPost && init.method === 'POST') {
      // Carried out, never answered: the caller's timeout ends the wait.
      await new Promise<never>((_, reject) => init.signal?.addEventListener('abort', () => reject(init.signal!.reason)));
    }
    const text = JSON.stringify(res.body);
    return { status: res.status, headers: { get: (n: string) => (n.toLowerCase() === 'content-type' ? 'application/json' : null) }, text: async () => text };
  };

  /** This fake as a real HTTP server on 127.0.0.1:0. */
  async listen(): Promise<{ url: string; server: Server } & AsyncDisposable> {
    const server = createServer((req, res) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => {
        const out = this.handle(req.method ?? 'GET', req.url ?? '/', req.headers as Record<string, string>, data ? JSON.parse(data) : undefined);
        res.writeHead(out.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(out.body));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, server, [Symbol.asyncDispose]: () => new Promise<void>((r) => server.close(() => r())) };
  }
}

/**
 * Props for `<Inbox>` over `approvals` as the data layer hands them over: fin-1 of finance,
 * connected, an 80×24 terminal (the inbox draws on all but its last row), every callback a mock.
 */
export function inboxProps(approvals: Approval[], over: Partial<InboxProps> = {}): InboxProps {
  return {
    approver: 'role:finance',
    actor: { id: 'fin-1', role: 'finance' },
    url: 'http://127.0.0.1:7401',
    connection: { state: 'ok', at: '2026-01-01T10:05:00.000Z' },
    loaded: true,
    approvals,
    runs: Object.fromEntries(approvals.map((a) => [a.run_id, runOf(a)])),
    events: Object.fromEntries(approvals.map((a) => [a.run_id, eventsOf()])),
    width: 80,
    height: 23,
    now: Date.parse('2026-01-01T10:05:00.000Z'),
    onFocus: vi.fn(),
    onDecide: vi.fn(),
    onDismissAlert: vi.fn(),
    onQuit: vi.fn(),
    ...over,
  };
}

/** Polls `fn` every 5 ms until it gives something truthy (at most `ms`). */
export async function until<T>(fn: () => T | undefined | false, ms = 3000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

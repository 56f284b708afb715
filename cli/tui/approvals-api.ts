/**
 * The kernel's approvals API as the approver's client sees it (interface 2.8, 4.1; decisions
 * 5.4, §6, §7): list and read approvals, decide one, and read the run it parks. Both the
 * inbox TUI and the non-interactive `svc approvals` commands go through this one client, over
 * the CLI's transport (cli/http-client.ts); the fetch function is injectable so the TUI's
 * data layer is tested without a daemon.
 */
import type { RunEvent, RunStateObject } from '../../src/types.js';
import { exchange, isListOfObjects, isObject, notSvcdMessage, type ClientOptions, type FetchLike } from '../http-client.js';

export type { FetchLike };

/** `cancelled`: its run was abandoned before anyone decided. */
export type ApprovalState = 'pending' | 'approved' | 'rejected' | 'cancelled';
export type ApprovalDecision = 'approved' | 'rejected';

/** Who decides (interface 2.8): an id and a role. */
export interface Actor {
  id: string;
  role: string;
}

/** The proposed action an approval holds, as enriched by the kernel (decisions 5.2). */
export interface ApprovalAction {
  tool: string;
  args?: Record<string, unknown>;
  summary?: string;
  connector?: string;
  operation?: string;
  writes?: boolean;
  system_of_record?: boolean;
  [member: string]: unknown;
}

/** One approval (decisions 5.4) with its decision fields once decided. */
export interface Approval {
  approval_id: string;
  run_id: string;
  step: string;
  action_id: string;
  action: ApprovalAction;
  rule: string;
  /** `role:<role>` */
  approver: string;
  state: ApprovalState;
  created_at: string;
  decided_at?: string | null;
  decision?: ApprovalDecision | null;
  actor?: Actor | null;
  reason?: string | null;
  /** Conditions that failed closed when it was asked for (decisions 5.1); absent when none. */
  errors?: Array<{ rule: string; message: string }>;
}

/** The run fields the inbox shows (decisions §6); the kernel sends more. */
export type RunView = Pick<RunStateObject, 'run_id' | 'state' | 'bundle' | 'workflow' | 'department' | 'requested_by' | 'usage' | 'budget'> &
  Partial<RunStateObject>;

/** A run event as the inbox shows it (decisions §7). */
export type EventView = Pick<RunEvent, 'seq' | 'kind'> & Partial<RunEvent>;

/** The kernel answered with a non-2xx status; `code` comes from the I 7.1 envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown>,
    /** The response body as received (printed with --json). */
    readonly body: unknown,
    /** The kernel address that answered. */
    readonly baseUrl?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The CLI client's options without extra headers; `timeoutMs` defaults to 10000 here. */
export type ApprovalsApiOptions = Omit<ClientOptions, 'headers'>;

export interface ListQuery {
  state?: ApprovalState;
  /** `role:<role>` */
  approver?: string;
  limit?: number;
  after?: string;
}

/** How many approvals one `listAll` reads at most (pages of 100). (Default: 1000) */
export const LIST_ALL_CAP = 1000;

/** The inbox's page size: svcd's largest (`limit` ≤ 500), so a full inbox is 2 list requests a poll, not 11. */
export const INBOX_PAGE = 500;

/**
 * The longest reason svcd takes with a decision, in characters (code points, as JSON Schema
 * counts them): `maxLength` of the POST /v1/approvals/{id} body in
 * daemon/kernel/approval-routes.ts. The inbox's prompt stops there, and says so.
 */
export const REASON_MAX_LENGTH = 4096;

/** The approvals part of the kernel API. */
export class ApprovalsApi {
  readonly baseUrl: string;

  constructor(private readonly opts: ApprovalsApiOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
  }

  /** GET /v1/approvals: one page. */
  async list(q: ListQuery = {}): Promise<{ approvals: Approval[]; next: string | null }> {
    const params = new URLSearchParams();
    if (q.state) params.set('state', q.state);
    if (q.approver) params.set('approver', q.approver);
    if (q.limit !== undefined) params.set('limit', String(q.limit));
    if (q.after) params.set('after', q.after);
    const qs = params.toString();
    const body = await this.call<{ approvals?: Approval[]; next?: string | null } | Approval[]>('GET', `/approvals${qs ? `?${qs}` : ''}`);
    // Tolerate a bare array as well as the {approvals, next} page.
    const approvals = Array.isArray(body) ? body : body.approvals;
    // An object without the list, or a list of things that are not approvals, is not svcd's
    // page: an empty inbox, or rows of blanks, would be a wrong answer.
    if (!Array.isArray(approvals) || !approvals.every((a) => isObject(a) && typeof a.approval_id === 'string')) {
      throw new ApiError(200, 'not_svcd', notSvcdMessage(200, this.baseUrl), {}, undefined, this.baseUrl);
    }
    return { approvals, next: Array.isArray(body) ? null : (body.next ?? null) };
  }

  /** Every page of GET /v1/approvals up to `cap`, newest first. */
  async listAll(q: Omit<ListQuery, 'after' | 'limit'> = {}, cap = LIST_ALL_CAP): Promise<Approval[]> {
    return (await this.listUpTo(q, cap)).approvals;
  }

  /**
   * Pages of GET /v1/approvals (`pageSize` each, svcd takes up to 500) up to `cap`, newest
   * first; `more` when svcd has more past the cap (the page that reached it had a `next`).
   */
  async listUpTo(q: Omit<ListQuery, 'after' | 'limit'>, cap: number, pageSize = 100): Promise<{ approvals: Approval[]; more: boolean }> {
    const out: Approval[] = [];
    let after: string | undefined;
    let more = false;
    const seen = new Set<string>();
    while (out.length < cap) {
      const page = await this.list({ ...q, limit: Math.min(pageSize, cap - out.length), after });
      for (const a of page.approvals) {
        if (!seen.has(a.approval_id)) {
          seen.add(a.approval_id);
          out.push(a);
        }
      }
      if (!page.next || page.approvals.length === 0 || page.next === after) break;
      after = page.next;
      more = out.length >= cap;
    }
    return { approvals: sortNewestFirst(out.slice(0, cap)), more };
  }

  /** GET /v1/approvals/{id} */
  get(id: string): Promise<Approval> {
    return this.call<Approval>('GET', `/approvals/${encodeURIComponent(id)}`);
  }

  /** POST /v1/approvals/{id}: 403 not_the_approver, 409 already_decided and 404 throw ApiError. */
  decide(id: string, decision: ApprovalDecision, actor: Actor, reason: string): Promise<{ run_id: string; run_state: string }> {
    return this.call('POST', `/approvals/${encodeURIComponent(id)}`, { decision, actor, reason }, ['run_id', 'run_state']);
  }

  /** GET /v1/runs/{id} */
  run(id: string): Promise<RunView> {
    return this.call<RunView>('GET', `/runs/${encodeURIComponent(id)}`);
  }

  /**
   * The last `n` events of a run, oldest first; `lastSeq` (from the run state) saves a walk of
   * the log. A page can stop short of its limit (svcd bounds pages in bytes): read on.
   */
  async recentEvents(runId: string, n: number, lastSeq?: number): Promise<EventView[]> {
    const known = lastSeq !== undefined && Number.isInteger(lastSeq);
    if (known && lastSeq < 1) return [];
    let from = known ? Math.max(1, lastSeq - n + 1) : 1;
    let tail: EventView[] = [];
    for (let i = 0; i < 100; i++) {
      const page = await this.events(runId, from, known ? n : 1000);
      tail = [...tail, ...page.events].slice(-n);
      if (page.events.length === 0 || !page.next_seq || page.next_seq <= from) break;
      if (known && page.next_seq > lastSeq) break;
      from = page.next_seq;
    }
    return tail;
  }

  /** GET /v1/runs/{id}/events */
  async events(runId: string, fromSeq: number, limit: number): Promise<{ events: EventView[]; next_seq: number | null }> {
    const body = await this.call<{ events?: EventView[]; next_seq?: number | null }>(
      'GET',
      `/runs/${encodeURIComponent(runId)}/events?from_seq=${fromSeq}&limit=${limit}`,
    );
    return { events: body.events ?? [], next_seq: body.next_seq ?? null };
  }

  /** `members`: what svcd's answer always has (an object without them is another server's). */
  private async call<T>(method: string, path: string, body?: unknown, members: readonly string[] = []): Promise<T> {
    const res = await exchange({ ...this.opts, baseUrl: this.baseUrl, timeoutMs: this.opts.timeoutMs ?? 10_000 }, method, path, body);
    const parsed = res.body;
    const ok = res.status >= 200 && res.status < 300;
    // svcd answers the inbox with JSON objects, and refuses with an envelope that has a code:
    // anything else is another server at this URL.
    if (ok && (res.status === 204 || isListOfObjects(parsed) || (isObject(parsed) && members.every((m) => Object.hasOwn(parsed, m))))) return parsed as T;
    const env = !ok && isObject(parsed) && isObject(parsed.error) && typeof parsed.error.code === 'string' ? parsed.error : null;
    if (!env) throw new ApiError(res.status, 'not_svcd', notSvcdMessage(res.status, this.baseUrl), {}, undefined, this.baseUrl);
    throw new ApiError(
      res.status,
      env.code as string,
      typeof env.message === 'string' ? env.message : `HTTP ${res.status}`,
      isObject(env.details) ? env.details : {},
      parsed,
      this.baseUrl,
    );
  }
}

/** Newest first: by created_at, then by id (ids are time-sortable ULIDs, decisions §1). */
export function sortNewestFirst(list: Approval[]): Approval[] {
  return [...list].sort((a, b) => {
    if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
    return a.approval_id < b.approval_id ? 1 : a.approval_id > b.approval_id ? -1 : 0;
  });
}

/** `--actor`'s role as the approver filter: `finance` → `role:finance`. */
export function approverOf(role: string): string {
  return role.startsWith('role:') ? role : `role:${role}`;
}

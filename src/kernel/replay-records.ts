/**
 * What replay (decisions §7) checks beside the hash chain: the records the kernel acts on that
 * no event hash covers. The run's remit is the control plane's signed token (decisions §3),
 * while the kernel decides actions under its copy in `runs.remit_payload`; approvals are
 * decided, listed and answered from the `approvals` table, which mirrors the log's approval
 * events. Either edited in the database would change what the kernel does (a wider autonomy, an
 * approver shown another action, another role allowed to approve) with a log that still
 * verifies, so replay compares each with what it must restate. The run's bundle is pinned by
 * its content address (decisions §4), so its stored body must still hash to it.
 */
import { bundleId } from '../bundle/sign.js';
import { canonicalJson } from '../encoding/canonical-json.js';
import { globalRedactor, REDACTED } from '../log/logger.js';
import { verifyRemitSignature } from '../remit/verify.js';
import type { ApprovalDecidedPayload, ApprovalRequestedPayload } from '../events/payloads.js';
import type { PolicyRunContext, RemitPayload, RunEvent, TrustedKeys } from '../types.js';
import { cancelledApprovalIds, sameIdentity, type ApprovalRow } from './approvals.js';
import type { RunRow } from './run-store.js';
import { isRecord } from '../util/is-record.js';

/**
 * `bundles.<bundle_id>` when the run's bundle as stored no longer has the content address the
 * run pinned (an edited body changes the steps, templates and compensations still to run), or
 * is gone. Read from the table, not the service's cache, which would hide an edit until restart.
 */
export function bundleDifferences(id: string, stored: { body: string } | undefined): string[] {
  if (!stored) return [`bundles.${id}`];
  try {
    return bundleId(JSON.parse(stored.body)) === id ? [] : [`bundles.${id}`];
  } catch {
    return [`bundles.${id}`];
  }
}

/** The remit members a policy sees (`run.remit`, decisions 5.1). */
export type RemitView = PolicyRunContext['remit'];

/**
 * Whether two stored values are the same JSON. A value JCS cannot write (1e400 edited into a
 * row: svc never writes one) equals nothing.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a ?? null) === canonicalJson(b ?? null);
  } catch {
    return false;
  }
}

/**
 * Whether a text recorded in the log stands for `value`. The log's copy went through the
 * redactor with the values registered when it was written (src/events/redact-payload.ts):
 * equal when both read alike through today's redactor, or when the recorded text's
 * `[REDACTED]` parts stand for text `value` has there (a value registered then and no
 * longer: a rotated secret, a removed connector).
 */
export function sameLoggedText(logged: string, value: string): boolean {
  if (logged === value || globalRedactor.redact(logged) === globalRedactor.redact(value)) return true;
  if (!logged.includes(REDACTED)) return false;
  const parts = logged.split(REDACTED);
  return fitsShape(parts, value) || fitsShape(parts, globalRedactor.redact(value));
}

/**
 * Whether `value` is `parts` joined by runs of at least one character each: what the regexp
 * `^p0.+p1.+…pk$` (dot matching newlines) said. That regexp backtracked in polynomial time of
 * the number of `[REDACTED]` parts (1,000 of them: 1.1 s on one string of a replay), and past
 * some thousands V8 could not compile it at all (a stack overflow). Leftmost matching of each
 * middle part is enough (a later match only leaves less room for the rest), so each part is
 * looked for once, left to right.
 */
export function fitsShape(parts: readonly string[], value: string): boolean {
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (parts.length < 2 || !value.startsWith(first)) return parts.length < 2 && value === first;
  let at = first.length; // where the next gap starts
  for (let i = 1; i < parts.length - 1; i++) {
    const found = value.indexOf(parts[i]!, at + 1);
    if (found === -1) return false;
    at = found + parts[i]!.length;
  }
  return value.length - last.length >= at + 1 && value.endsWith(last);
}

/** Whether a value recorded in the log stands for `value`: as sameLoggedText says for each string in it. */
export function sameAsLogged(logged: unknown, value: unknown): boolean {
  if (sameJson(logged, value) || sameJson(logged, globalRedactor.redactValue(value ?? null))) return true;
  if (typeof logged === 'string' && typeof value === 'string') return sameLoggedText(logged, value);
  if (Array.isArray(logged) && Array.isArray(value)) return logged.length === value.length && logged.every((v, i) => sameAsLogged(v, value[i]));
  if (isRecord(logged) && isRecord(value)) {
    const keys = Object.keys(logged);
    return keys.length === Object.keys(value).length && keys.every((k) => Object.hasOwn(value, k) && sameAsLogged(logged[k], value[k]));
  }
  return false;
}

/**
 * The run's remit as its signed token says, and the row's remit columns that disagree with it
 * (`runs.remit_token` when the token does not verify under a trusted key or names another run
 * or remit; `runs.remit_payload` when the copy the kernel decides under is not the token's).
 * The token's times are not checked: an expired remit still says what the run was given.
 */
export function boundRemit(row: Pick<RunRow, 'run_id' | 'remit_id' | 'remit_token' | 'remit_payload'>, keys: TrustedKeys): { remit: RemitView | null; differences: string[] } {
  const signed = verifyRemitSignature(row.remit_token, keys);
  if (!signed.ok || signed.payload.run !== row.run_id || signed.payload.rid !== row.remit_id) return { remit: null, differences: ['runs.remit_token'] };
  const remit = remitView(signed.payload);
  let copy: unknown;
  try {
    copy = JSON.parse(row.remit_payload);
  } catch {
    copy = undefined;
  }
  const differences = copy !== undefined && sameJson(copy, signed.payload) ? [] : ['runs.remit_payload'];
  return { remit, differences };
}

function remitView(p: RemitPayload): RemitView {
  return { autonomy: p.autonomy, grants: [...p.grants], tools: [...p.tools], scopes: [...p.scopes] };
}

/**
 * Why an approval's decision does not stand under decisions 5.4 (the decider's role must be
 * the approver's, and the run's requester may not decide), or null when it stands. Read from
 * the log alone: a row of `approvals` edited to name another approver lets the kernel accept
 * that role's decision, and the log then records an approval the rule refuses.
 */
export function approvalDecisionProblem(requested: ApprovalRequestedPayload, decidedBy: RunEvent['actor'], requester: string | null): string | null {
  const actor = decidedBy !== null && typeof decidedBy === 'object' ? (decidedBy as Record<string, unknown>) : {};
  const role = typeof actor.role === 'string' ? actor.role : null;
  const id = typeof actor.id === 'string' ? actor.id : null;
  const approver = String(requested.approver);
  // Every approver svc writes is role:<role> (decisions 5.2): another was put there by hand.
  if (!approver.startsWith('role:')) return `approval ${requested.approval_id} names ${approver} as its approver, which is not role:<role>`;
  const wanted = approver.slice('role:'.length);
  if (role === null || !sameAsLogged(wanted, role)) return `approval ${requested.approval_id} was decided by role:${role ?? '(none)'}, not by its approver ${approver}`;
  if (id !== null && requester !== null && sameIdentity(id, requester)) return `approval ${requested.approval_id} was decided by the run's requester ${id}`;
  return null;
}

/** One approval as the log says it is. */
interface LoggedApproval {
  requested: ApprovalRequestedPayload;
  decided: { payload: ApprovalDecidedPayload; actor: RunEvent['actor'] } | null;
  cancelled: boolean;
}

/**
 * The log's approvals, built an event at a time in log order: what a decision that relied on
 * an approval is checked against (as far as the log has got), and at the end what the
 * `approvals` rows are compared with.
 */
export class ApprovalMirror {
  private readonly logged = new Map<string, LoggedApproval>();

  add(ev: Pick<RunEvent, 'kind' | 'payload' | 'actor'>): void {
    const p = ev.payload;
    if (ev.kind === 'approval.requested') this.logged.set(String(p.approval_id), { requested: p as unknown as ApprovalRequestedPayload, decided: null, cancelled: false });
    const entry = this.logged.get(String(p.approval_id));
    if (ev.kind === 'approval.decided' && entry) entry.decided = { payload: p as unknown as ApprovalDecidedPayload, actor: ev.actor };
    for (const id of cancelledApprovalIds(ev)) {
      const cancelled = this.logged.get(id);
      if (cancelled) cancelled.cancelled = true;
    }
  }

  get(approvalId: string): Readonly<LoggedApproval> | undefined {
    return this.logged.get(approvalId);
  }

  /**
   * The rows' columns that differ from the log, as `approvals.<approval_id>.<column>`, and
   * `approvals.<approval_id>` for a row the log does not have or an approval the store lacks.
   * Times are not compared: the row's are taken a moment before its event's `at`.
   */
  differences(rows: readonly ApprovalRow[]): string[] {
    const out: string[] = [];
    const seen = new Set<string>();
    for (const row of rows) {
      const logged = this.logged.get(row.approval_id);
      seen.add(row.approval_id);
      if (!logged) {
        out.push(`approvals.${row.approval_id}`);
        continue;
      }
      for (const [column, expected] of Object.entries(expectedColumns(logged))) {
        if (!sameAsLogged(expected, storedColumn(row, column))) out.push(`approvals.${row.approval_id}.${column}`);
      }
    }
    for (const id of this.logged.keys()) if (!seen.has(id)) out.push(`approvals.${id}`);
    return out;
  }
}

/** The columns of an approval row as its events restate them. */
function expectedColumns(a: LoggedApproval): Record<string, unknown> {
  const r = a.requested;
  const d = a.decided;
  const actor = d && d.actor !== null && typeof d.actor === 'object' ? d.actor : null;
  return {
    step: r.step,
    action_id: r.action_id,
    action: r.action,
    rule: r.rule,
    approver: r.approver,
    state: d ? d.payload.decision : a.cancelled ? 'cancelled' : 'pending',
    decision: d ? d.payload.decision : null,
    actor,
    reason: d ? d.payload.reason : null,
  };
}

/** A row's column as a value: `action` and `actor` are JSON texts (unreadable text stays text, and differs). */
function storedColumn(row: ApprovalRow, column: string): unknown {
  const value = (row as unknown as Record<string, unknown>)[column];
  if ((column === 'action' || column === 'actor') && typeof value === 'string') {
    try {
      return JSON.parse(value) as unknown;
    } catch {
      return value;
    }
  }
  return value;
}

/**
 * Writes of unfinished steps, which an abandon will not undo. Abandon compensates completed
 * steps only (decisions §6): a step that was leased when the run was abandoned never
 * completed, so nothing undoes it, yet its worker may already have written — an action the
 * kernel allowed, or a write the gateway ran for it. Abandon cannot know whether those took
 * effect; it names them on `run.abandon_requested` and in its answer so an operator can check
 * them by hand. (Completed steps are out of scope: each is undone by its `compensate`, or was
 * left without one by the bundle's author.)
 */

import { canonicalHash } from '../encoding/canonical-json.js';
import type { UncompensatedWrite } from '../events/payloads.js';
import { isRecord } from '../util/is-record.js';

export type { UncompensatedWrite };

interface LoggedEvent {
  seq: number;
  kind: string;
  payload: unknown;
}

/** Most writes named on one abandon: the log keeps the rest, the payload stays small. */
export const MAX_NAMED_WRITES = 100;

/**
 * Gateway outcomes of a call whose upstream was never asked (src/gateway/call.ts). Every
 * other outcome may have written: `deterministic_failure` too (an MCP tool's error result,
 * or an answer too deep to store after the upstream acted).
 */
const NOTHING_RAN = new Set(['args_invalid', 'idempotency_conflict', 'idempotency_in_flight', 'connector_quarantined', 'circuit_open']);

/** Whether a `tool.called` payload is of a write that ran, or may have (a replay stands for its first call). */
export function calledWrite(payload: unknown): boolean {
  return isRecord(payload) && payload.writes === true && payload.replayed !== true && !NOTHING_RAN.has(String(payload.outcome));
}

/** An allowed write action, or a gateway call that ran (or may have run) a write. */
type Write =
  | { kind: 'action.decided'; step: string; tool: string; actionId: string; argsHash: string }
  | { kind: 'tool.called'; step: string; tool: string; argsHash: string | null; outcome: string | null; key: string | null };

function writeOf(e: LoggedEvent): Write | null {
  const p = e.payload;
  if (!isRecord(p) || typeof p.step !== 'string') return null;
  if (e.kind === 'action.decided') {
    const action = isRecord(p.action) ? p.action : null;
    if (p.decision !== 'allow' || action?.writes !== true || typeof action.tool !== 'string') return null;
    // The gateway's args_hash of the call that runs it; an event from before the kernel recorded
    // it is hashed from its arguments as stored (which the log's redaction may have changed).
    const argsHash = typeof p.args_hash === 'string' ? p.args_hash : canonicalHash(isRecord(action.args) ? action.args : {});
    return { kind: 'action.decided', step: p.step, tool: action.tool, actionId: typeof p.action_id === 'string' ? p.action_id : `seq:${e.seq}`, argsHash };
  }
  if (e.kind === 'tool.called') {
    // A replay answered from the idempotency store: the write it stands for is its first call.
    if (!calledWrite(p) || typeof p.tool !== 'string') return null;
    const key = typeof p.idempotency_key === 'string' && p.idempotency_key !== '' ? p.idempotency_key : null;
    return { kind: 'tool.called', step: p.step, tool: p.tool, argsHash: typeof p.args_hash === 'string' ? p.args_hash : null, outcome: typeof p.outcome === 'string' ? p.outcome : null, key };
  }
  return null;
}

/**
 * From a run's events in seq order: the writes of steps with no `step.completed` — the first
 * `MAX_NAMED_WRITES` of them, and how many there are. One allowed action is one write,
 * however often it was proposed again (a retried step proposes it anew, same action id) or
 * called again; the first gateway call that ran it is named on it as `called_seq`. A call is
 * an action's when it is of the same step and tool with the same arguments (the gateway's
 * `args_hash`; a call recorded without one, by the tool alone). A gateway write no allowed
 * action accounts for is a write of its own. (A step that completed on a later attempt is
 * compensated like any completed step; its earlier attempts' writes are not named.)
 * A call refused `idempotency_outcome_unknown` ran nothing: it names a write only when no
 * earlier named call of the same step and tool holds its idempotency key (a gateway that
 * stopped mid-write recorded no call of its own); otherwise it is that write again, and
 * every resume of a quarantined step would name it once more.
 */
export function uncompensatedWrites(events: readonly LoggedEvent[]): { named: UncompensatedWrite[]; total: number } {
  const completed = new Set<string>();
  for (const e of events) {
    if (e.kind === 'step.completed' && isRecord(e.payload) && typeof e.payload.step === 'string') completed.add(e.payload.step);
  }
  const named: UncompensatedWrite[] = [];
  let total = 0;
  const count = (entry: UncompensatedWrite) => {
    total++;
    if (named.length < MAX_NAMED_WRITES) named.push(entry);
  };
  /** The allowed actions seen (their entries named or not): the ids per step, the actions per step and tool. */
  const seen = new Set<string>();
  const byStepTool = new Map<string, Array<{ argsHash: string; entry: UncompensatedWrite }>>();
  /** Idempotency keys of the gateway writes named on their own, per step and tool. */
  const namedKeys = new Set<string>();
  for (const e of events) {
    const w = writeOf(e);
    if (!w || completed.has(w.step)) continue;
    const stepTool = JSON.stringify([w.step, w.tool]);
    if (w.kind === 'action.decided') {
      const id = JSON.stringify([w.step, w.actionId]);
      if (seen.has(id)) continue; // proposed again: the same write
      seen.add(id);
      const entry: UncompensatedWrite = { seq: e.seq, kind: 'action.decided', step: w.step, tool: w.tool };
      const list = byStepTool.get(stepTool) ?? [];
      list.push({ argsHash: w.argsHash, entry });
      byStepTool.set(stepTool, list);
      count(entry);
      continue;
    }
    const mine = (byStepTool.get(stepTool) ?? []).filter((a) => w.argsHash === null || a.argsHash === w.argsHash);
    const outcome = w.outcome === null ? {} : { outcome: w.outcome };
    if (mine.length === 0) {
      const keyed = w.key === null ? null : JSON.stringify([w.step, w.tool, w.key]);
      if (keyed !== null && w.outcome === 'idempotency_outcome_unknown' && namedKeys.has(keyed)) continue; // that write, refused again
      if (keyed !== null) namedKeys.add(keyed);
      count({ seq: e.seq, kind: 'tool.called', step: w.step, tool: w.tool, ...outcome });
      continue;
    }
    // The action this call ran: the earliest one not yet called; a later call of an action
    // already called is that action again (a retry), whose outcome is now the latest.
    const action = mine.find((a) => a.entry.called_seq === undefined) ?? mine.findLast((a) => a.entry.called_seq !== undefined);
    if (!action) continue;
    if (action.entry.called_seq === undefined) action.entry.called_seq = e.seq;
    else {
      // Called again: the outcome shown is this call's, so say which call that is.
      action.entry.calls = (action.entry.calls ?? 1) + 1;
      action.entry.last_called_seq = e.seq;
    }
    if (w.outcome === null) delete action.entry.outcome;
    else action.entry.outcome = w.outcome;
  }
  return { named, total };
}

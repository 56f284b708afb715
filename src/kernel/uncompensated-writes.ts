/**
 * Writes of unfinished steps, which an abandon will not undo. Abandon compensates completed
 * steps only (decisions §6): a step that was leased when the run was abandoned never
 * completed, so nothing undoes it, yet its worker may already have written — an action the
 * kernel allowed, or a write the gateway ran for it. Abandon cannot know whether those took
 * effect; it names them on `run.abandon_requested` and in its answer so an operator can check
 * them by hand. (Completed steps are out of scope: each is undone by its `compensate`, or was
 * left without one by the bundle's author.)
 */

import type { UncompensatedWrite } from '../events/payloads.js';

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

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function writeOf(e: LoggedEvent): { step: string; tool: string } | null {
  const p = e.payload;
  if (!isRecord(p) || typeof p.step !== 'string') return null;
  if (e.kind === 'action.decided') {
    const action = isRecord(p.action) ? p.action : null;
    if (p.decision !== 'allow' || action?.writes !== true || typeof action.tool !== 'string') return null;
    return { step: p.step, tool: action.tool };
  }
  if (e.kind === 'tool.called') {
    // A replay answered from the idempotency store: the write it stands for is its first call.
    if (p.writes !== true || typeof p.tool !== 'string' || p.replayed === true || NOTHING_RAN.has(String(p.outcome))) return null;
    return { step: p.step, tool: p.tool };
  }
  return null;
}

/**
 * From a run's events in seq order: the writes of steps with no `step.completed` — the first
 * `MAX_NAMED_WRITES` of them, and how many there are. An allowed write action is one write
 * whether or not the gateway's `tool.called` for it follows: that call (the next one of the
 * same step and tool) is named on the action as `called_seq`, not counted again. A gateway
 * write no allowed action accounts for is a write of its own. (A step that completed on a
 * later attempt is compensated like any completed step; its earlier attempts' writes are not
 * named.)
 */
export function uncompensatedWrites(events: readonly LoggedEvent[]): { named: UncompensatedWrite[]; total: number } {
  const completed = new Set<string>();
  for (const e of events) {
    if (e.kind === 'step.completed' && isRecord(e.payload) && typeof e.payload.step === 'string') completed.add(e.payload.step);
  }
  const named: UncompensatedWrite[] = [];
  let total = 0;
  /** Allowed actions whose gateway call has not been seen yet, per step and tool (null: counted, not named). */
  const awaitingCall = new Map<string, Array<UncompensatedWrite | null>>();
  for (const e of events) {
    const w = writeOf(e);
    if (!w || completed.has(w.step)) continue;
    const key = JSON.stringify([w.step, w.tool]);
    if (e.kind === 'tool.called' && (awaitingCall.get(key)?.length ?? 0) > 0) {
      const action = awaitingCall.get(key)!.shift();
      if (action) action.called_seq = e.seq;
      continue;
    }
    total++;
    const entry: UncompensatedWrite = { seq: e.seq, kind: e.kind as UncompensatedWrite['kind'], step: w.step, tool: w.tool };
    if (named.length < MAX_NAMED_WRITES) named.push(entry);
    if (e.kind === 'action.decided') awaitingCall.set(key, [...(awaitingCall.get(key) ?? []), named.at(-1) === entry ? entry : null]);
  }
  return { named, total };
}

/**
 * Writes an abandon will not undo. Abandon compensates completed steps only (decisions §6): a
 * step that was leased when the run was abandoned never completed, so nothing undoes it, yet
 * its worker may already have written — an action the kernel allowed, or a write the gateway
 * ran for it. Abandon cannot know whether those took effect; it names them on
 * `run.abandon_requested` and in its answer so an operator can check them by hand.
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

/** Gateway outcomes after which the upstream never ran the call (src/gateway/call.ts). */
const NOTHING_RAN = new Set(['args_invalid', 'deterministic_failure', 'idempotency_conflict', 'connector_quarantined', 'circuit_open', 'tool_not_found', 'refused']);

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
    if (p.writes !== true || typeof p.tool !== 'string' || NOTHING_RAN.has(String(p.outcome))) return null;
    return { step: p.step, tool: p.tool };
  }
  return null;
}

/**
 * From a run's events in seq order: the allowed write actions and the writes the gateway ran
 * (or may have run) for steps with no `step.completed`, at most `MAX_NAMED_WRITES`. (A step
 * that completed on a later attempt is compensated, its earlier attempts' writes with it.)
 */
export function uncompensatedWrites(events: readonly LoggedEvent[]): UncompensatedWrite[] {
  const completed = new Set<string>();
  for (const e of events) {
    if (e.kind === 'step.completed' && isRecord(e.payload) && typeof e.payload.step === 'string') completed.add(e.payload.step);
  }
  const found: UncompensatedWrite[] = [];
  for (const e of events) {
    const w = writeOf(e);
    if (!w || completed.has(w.step)) continue;
    found.push({ seq: e.seq, kind: e.kind as UncompensatedWrite['kind'], step: w.step, tool: w.tool });
    if (found.length === MAX_NAMED_WRITES) break;
  }
  return found;
}

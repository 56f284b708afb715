/**
 * The secret redactor over an event's payload before it is hashed and stored (docs/design.md,
 * Events). A posted event (note, tool.called, tool.refused, model.called) is the poster's
 * word and is redacted whole. A kernel event is redacted except for the members the kernel
 * makes or checked itself and reads back — ids, step names, attempts, times, spend, the
 * pinned policies and the rules that decided: the redactor turns any number or string that
 * shows a registered value into `[REDACTED]`, and every `${VAR}` of the gateway's config
 * counts (svc-gateway(5), SECRETS), so a `${DB_PORT}` of 5432 once made a step's usage of
 * 15432 tokens a string the reducer charged as 0, and a remit spend of 5432 tokens a budget
 * no usage exceeded. None of these members carries what a worker, a tool or a caller wrote:
 * outputs, inputs, arguments, errors, reasons, approvers and actors are still redacted.
 */
import type { Redactor } from '../log/logger.js';
import { isExternalKind } from './kinds.js';

/** `true`: the member as is; an object: its members so named as is, the rest redacted. */
type Keep = true | { readonly [member: string]: Keep };

const KERNEL_OWNED: { readonly [member: string]: Keep } = {
  // ids the kernel made
  run_id: true,
  bundle_id: true,
  remit_id: true,
  parent_run_id: true,
  lease_id: true,
  released_lease_id: true,
  action_id: true,
  approval_id: true,
  cancelled_approval_ids: true,
  args_hash: true,
  // step names of the signed bundle, and what the kernel scheduled for them
  step: true,
  steps: true,
  compensations: true,
  compensated: true,
  failed: true,
  kind: true,
  attempt: true,
  next_attempt: true,
  expires_at: true,
  ready_at: true,
  delay_ms: true,
  from_state: true,
  via: true,
  deterministic: true,
  // spend, checked as numbers by the routes and the remit service
  budget: true,
  usage: true,
  unreported_usage: true,
  reserved: true,
  // what decided an action, which replay evaluates again (not `approver`: a manager's
  // approver is `role:<requested_by.manager>`, the requester's word, and replay derives it
  // again from the redacted run)
  policies: true,
  source: true,
  decision: true,
  rule: true,
  matched: true,
  run: { id: true, usage: true },
  // the kernel's own summary of writes no compensation undoes (seqs, step and tool names, outcomes)
  uncompensated_writes: true,
  uncompensated_writes_total: true,
};

/**
 * `payload` of an event of `kind` as it may be stored: a copy when anything could show a secret.
 * A posted `model.called` keeps a `usage` of plain numbers: abandon charges it (src/kernel/
 * unreported-usage.ts), and a count cannot carry a value its poster never saw.
 */
export function redactEventPayload(redactor: Redactor, kind: string, payload: Record<string, unknown>): Record<string, unknown> {
  if (redactor.size === 0) return payload;
  if (kind === 'model.called' && isNumbers(payload.usage)) return keeping(redactor, payload, { usage: true });
  if (isExternalKind(kind)) return redactor.redactValue(payload);
  return keeping(redactor, payload, KERNEL_OWNED);
}

/** `{tokens?, usd?}` of numbers and nothing else: a member of another name is the poster's text. */
function isNumbers(v: unknown): boolean {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && Object.entries(v).every(([k, x]) => (k === 'tokens' || k === 'usd') && typeof x === 'number');
}

function keeping(redactor: Redactor, value: Record<string, unknown>, keep: { readonly [member: string]: Keep }): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const rule = Object.hasOwn(keep, k) ? keep[k] : undefined;
    let kept: unknown;
    if (rule === true) kept = v;
    else if (rule !== undefined && v !== null && typeof v === 'object' && !Array.isArray(v)) kept = keeping(redactor, v as Record<string, unknown>, rule);
    else kept = redactor.redactValue(v);
    // defineProperty: a `__proto__` member is data here, not the object's prototype.
    Object.defineProperty(out, rule === undefined ? redactor.redact(k) : k, { value: kept, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

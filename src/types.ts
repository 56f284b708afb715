/**
 * Glossary of svc's nouns (interface §2, decisions §3–§9). Every module speaks these types.
 *
 * - Remit: a signed capability grant (token `krt1.<key_id>.<payload>.<signature>`).
 * - Bundle: a signed set of workflows, prompts, tool needs and mock scripts.
 * - Policy: named, versioned rules deciding proposed actions.
 * - Run: one execution of a bundle workflow under a remit; its steps are handed to workers
 *   through leases; its history is a hash-chained event log.
 * - Approval: a parked action waiting for a human with the approver's role.
 * - Tool descriptor: what the gateway knows about a `<connector>.<operation>`.
 */

export type Autonomy = 'observe' | 'propose' | 'supervised' | 'autonomous';
export const AUTONOMY_ORDER: readonly Autonomy[] = ['observe', 'propose', 'supervised', 'autonomous'];

export interface Requester {
  id: string;
  role: string;
  manager: string;
}

/** The same requester: id, role and manager alike, as written (a remit keeps its requester). */
export function sameRequester(a: Requester, b: Requester): boolean {
  return a.id === b.id && a.role === b.role && a.manager === b.manager;
}

export interface Spend {
  tokens: number;
  usd: number;
}

/** Interface 2.1: the signed remit payload. Times are epoch seconds. */
export interface RemitPayload {
  rid: string;
  parent?: string;
  run?: string;
  iss: string;
  iat: number;
  nbf: number;
  exp: number;
  tools: string[];
  scopes: string[];
  grants: string[];
  spend: Spend;
  autonomy: Autonomy;
  policy_set: string[];
  requested_by: Requester;
}

/** GET /v1/remits/{id}: the payload plus links. */
export interface RemitRecord extends RemitPayload {
  parent_id: string | null;
  run_id: string | null;
}

/** What a gateway call asks of a remit (interface 5.3 steps 4–7). */
export interface RemitCallCheck {
  run_id?: string | null;
  tool?: string;
  /** Every scope the call touches; each must be granted (call rule 3). */
  scopes?: string[];
  /**
   * Other literals that grant a scope when the remit names one of them exactly (an mcp
   * server's `<server>:*` for `mcp:<server>:*`, interface 5.3 step 6 against the 4.2 table).
   */
  scopeAlternatives?: (scope: string) => readonly string[];
  /** True for a tool with `writes: true`. */
  writes?: boolean;
}

export type RefusalReason =
  | 'token_malformed'
  | 'signature_invalid'
  | 'remit_expired'
  | 'remit_not_yet_valid'
  | 'remit_run_mismatch'
  | 'tool_not_in_remit'
  | 'scope_not_granted'
  | 'autonomy_too_low';

export type VerifyResult =
  | { ok: true; payload: RemitPayload }
  | { ok: false; reason: RefusalReason; detail: string };

// ---------------------------------------------------------------- bundles (decisions §4)

export type StepKind = 'model' | 'tool' | 'action';

export interface RetryPolicy {
  max_attempts?: number;
  initial_delay_ms?: number;
  max_delay_ms?: number;
}

export interface StepDef {
  id: string;
  kind: StepKind;
  prompt?: string;
  tool?: string;
  tools?: string[];
  args?: Record<string, unknown>;
  output_schema?: Record<string, unknown>;
  retry?: RetryPolicy;
  timeout_seconds?: number;
  compensate?: { tool: string; args?: Record<string, unknown> };
}

export interface WorkflowDef {
  department?: string;
  input_schema: Record<string, unknown>;
  steps: StepDef[];
}

/** Scripted model behaviour for the mock provider (one entry per model step). */
export interface MockStepScript {
  output?: unknown;
  tool_calls?: Array<{ tool: string; args?: Record<string, unknown> }>;
  actions?: Array<Record<string, unknown>>;
  usage?: Partial<Spend>;
  /** What the model "said" with every answer. */
  text?: string;
  /** Waited before every answer. */
  delay_ms?: number;
  /** The first answer fails with this, on every attempt. */
  error?: { code: string; message?: string; deterministic?: boolean };
}

export interface Bundle {
  name: string;
  version: string;
  description?: string;
  department?: string;
  systems_of_record?: string[];
  tools?: Record<string, { writes?: boolean; description?: string }>;
  prompts?: Record<string, string>;
  mock?: Record<string, MockStepScript>;
  pacing?: Partial<Record<StepKind, { max_concurrent?: number; min_interval_ms?: number }>>;
  workflows: Record<string, WorkflowDef>;
}

export interface StoredBundle {
  bundle_id: string;
  name: string;
  version: string;
  bundle: Bundle;
  signature: { key_id: string; signature: string };
  created_at: string;
}

// ---------------------------------------------------------------- policies (decisions §5)

export type Decision = 'allow' | 'deny' | 'approval_required';

/** An action as the policy sees it, enriched by the kernel (never trusted from the worker). */
export interface PolicyAction {
  tool: string;
  connector: string;
  operation: string;
  args: Record<string, unknown>;
  writes: boolean;
  system_of_record: boolean;
  summary: string;
}

/** The `run` variable of a policy expression. */
export interface PolicyRunContext {
  id: string;
  bundle: string;
  workflow: string;
  department: string;
  requested_by: Requester;
  input: unknown;
  usage: Spend;
  remit: { autonomy: Autonomy; grants: string[]; tools: string[]; scopes: string[] };
}

export interface PolicyRef {
  name: string;
  version: string;
}

export interface StoredPolicy extends PolicyRef {
  policy_id: string;
  source: string;
  created_at: string;
}

export interface DecisionResult {
  decision: Decision;
  /** `<policy>/<rule>`, `default/sor_write`, `default/allow`, `approved:<id>` or `rejected:<id>`. */
  rule: string;
  /** `role:<role>` when the decision is approval_required. */
  approver: string | null;
  matched: Array<{ rule: string; effect: Decision }>;
  errors: Array<{ rule: string; message: string }>;
}

// ---------------------------------------------------------------- runs (decisions §6)

export type RunState = 'running' | 'parked' | 'completed' | 'failed' | 'abandoning' | 'abandoned';
export type ParkedReason = 'human' | 'quarantine' | 'connector_quarantined';
export type StepState =
  | 'pending'
  | 'leased'
  | 'retry_wait'
  | 'completed'
  | 'failed'
  | 'quarantined'
  | 'compensating'
  | 'compensated';
export type LeaseKind = 'model' | 'tool' | 'action' | 'compensation';
/** Every kind of lease, in the order the kernel and the worker list them. */
export const LEASE_KINDS: readonly LeaseKind[] = ['model', 'tool', 'action', 'compensation'];

export interface ErrorInfo {
  code: string;
  message: string;
}

export interface StepStatus {
  state: StepState;
  attempt: number;
  output: unknown;
  error: ErrorInfo | null;
  started_at: string | null;
  ended_at: string | null;
}

/** What a run is started with and never changes: fixed by `run.created`. */
export interface RunIdentity {
  run_id: string;
  bundle_id: string;
  bundle: { name: string; version: string };
  workflow: string;
  department: string;
  input: unknown;
  requested_by: Requester;
  remit_id: string;
  policies: PolicyRef[];
}

/** GET /v1/runs/{id} (decisions §6). */
export interface RunStateObject extends RunIdentity {
  state: RunState;
  parked_reason: ParkedReason | null;
  current_step: string | null;
  steps: Record<string, StepStatus>;
  usage: Spend;
  budget: Spend;
  pending_approval_id: string | null;
  output: unknown;
  error: ErrorInfo | null;
  created_at: string;
  updated_at: string;
  last_seq: number;
  head_hash: string;
  head_signature: string;
}

/** Decisions §7: one entry of a run's log. */
export interface RunEvent {
  seq: number;
  hash: string;
  prev_hash: string;
  kind: string;
  payload: Record<string, unknown>;
  actor: Record<string, unknown> | string | null;
  at: string;
}

// ---------------------------------------------------------------- gateway (interface 2.9)

export type ContractType = 'string' | 'number' | 'bool' | 'object' | 'list';

export interface ToolDescriptor {
  id: string;
  connector: string;
  description: string;
  writes: boolean;
  input_schema: Record<string, unknown>;
  scope_derivation: string;
  contract: { required: Record<string, ContractType> };
  /** Result fields that carry a data class (interface 5.5), e.g. {"email": "pii"}. */
  data_classes?: Record<string, string>;
}

/** Where the kernel learns what a tool is (the gateway in-process, or over HTTP). */
export interface ToolCatalog {
  describe(toolId: string): Promise<ToolDescriptor | null>;
}

// ---------------------------------------------------------------- keys (decisions §2)

/** Raw 32-byte Ed25519 public keys by key id: the control-plane keys trusted for remits. */
export interface TrustedKeys {
  lookup(keyId: string): Uint8Array | null;
}

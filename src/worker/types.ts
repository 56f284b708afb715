/**
 * The worker's view of the kernel's lease (interface 2.6, decisions §6) and the shapes its
 * executors and providers exchange.
 *
 * - Lease: one step of one run handed to this worker until `expires_at`, kept alive by
 *   heartbeats every `heartbeat_seconds`.
 * - Executor: runs one lease kind (`tool`, `action`, `compensation`, `model`).
 * - Provider: the model behind a `model` step (`mock` or an OpenAI-compatible API).
 * - Call index: the position of a model call, tool call or action inside one step; it makes
 *   idempotency keys and resumption after a park deterministic.
 */
import type { LeaseKind, MockStepScript, Spend, ToolDescriptor } from '../types.js';

/** A step definition as leased; args of tool, action and compensation steps arrive rendered. */
export interface LeasedStepDef {
  id?: string;
  kind?: string;
  prompt?: string;
  tool?: string;
  tools?: string[];
  args?: Record<string, unknown>;
  summary?: string;
  output_schema?: Record<string, unknown>;
  timeout_seconds?: number;
  /** On a `compensation` lease: the compensate tool and its rendered args. */
  compensate?: { tool: string; args?: Record<string, unknown> };
  [key: string]: unknown;
}

/** One event of the run as carried in `prior_events` (decisions §7). */
export interface PriorEvent {
  seq: number;
  kind: string;
  payload: Record<string, unknown>;
  actor?: unknown;
  at?: string;
}

/** Pacing of one step kind in a bundle (decisions §4). */
export interface KindPacing {
  /** Steps of this kind run at once on this worker. (Default: unlimited) */
  max_concurrent?: number;
  /** Milliseconds between the starts of two steps of this kind. (Default: 0) */
  min_interval_ms?: number;
}

export interface LeaseContext {
  input: unknown;
  steps: Record<string, { output: unknown }>;
  run: { id: string; bundle: string; workflow: string; requested_by?: unknown; department?: string };
  remit_token: string;
  remit: { autonomy: string; grants: string[]; tools: string[]; scopes: string[] };
  prompts: Record<string, string>;
  mock: Record<string, MockStepScript>;
  /** Tool descriptors the bundle names, by tool id (possibly partial). */
  tools: Record<string, Partial<ToolDescriptor>> | Array<Partial<ToolDescriptor>>;
  pacing: Partial<Record<string, KindPacing>>;
  approved_actions: string[];
  prior_events: PriorEvent[];
  /** seq of the step's first lease; `prior_events` is cut to its last 1000 when it starts later. */
  prior_events_from_seq?: number | null;
  budget?: { tokens: number; usd: number; used_tokens: number; used_usd: number };
}

/** The 200 body of POST /v1/leases. */
export interface Lease {
  lease_id: string;
  run_id: string;
  step: string;
  attempt: number;
  expires_at: string;
  heartbeat_seconds: number;
  /** The lease's ttl, when the kernel says (it does: decisions §6). */
  ttl_seconds?: number;
  /** Present when the kernel says which kind it leased (else derived from step_def). */
  kind?: LeaseKind;
  step_def: LeasedStepDef;
  context: LeaseContext;
}

/** Usage reported on complete and fail. */
export type Usage = Spend;

export const ZERO_USAGE: Usage = Object.freeze({ tokens: 0, usd: 0 }) as Usage;


/** How an executor ended a step (the worker turns it into complete, fail or nothing). */
export type StepOutcome =
  | { type: 'completed'; output: unknown; usage: Usage }
  /** An action needs approval: the kernel parked the run and released the lease. */
  | { type: 'parked'; action_id: string; approval_id: string | null; usage: Usage };

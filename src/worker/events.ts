/**
 * The worker's lifecycle as typed events (graphile-worker's WorkerEventMap): the worker emits,
 * the CLI subscribes for logs, tests subscribe to wait for outcomes. A listener that throws
 * never breaks the worker.
 */
import { EventEmitter } from 'node:events';
import type { GatewayOutage } from './gateway-client.js';
import type { StepActivity } from './step-runtime.js';
import type { Usage } from './types.js';

/** Identifies the step an event is about. */
export interface StepInfo {
  lease_id: string;
  run_id: string;
  step: string;
  kind: string;
  attempt: number;
}

export interface WorkerEventMap {
  /** The worker began polling; with where it works, so a mistyped address shows in the first line it logs. */
  'worker:start': { worker_id: string; kinds: string[]; concurrency: number; provider: string; kernel_url: string; gateway_url: string };
  /** The worker stopped: no step runs any more. */
  'worker:stop': { worker_id: string };
  /** A shutdown began; `in_flight` steps are finishing. */
  'worker:stopping': { worker_id: string; in_flight: number; grace_ms: number };
  /** Asking the kernel for work failed; the worker retries after `retry_in_ms`. */
  'poll:error': { error: string; retry_in_ms: number };
  /**
   * The gateway could not be reached (or answered 503): the call is asked again for up to
   * `retry_for_ms`. Once per outage of one call; a tool call names its run, step, lease and tool.
   */
  'gateway:unreachable': GatewayOutage;
  /** A request gave up on the gateway: no new step is taken until it answers a probe. */
  'gateway:paused': { error: string };
  /** The gateway answers again; leasing goes on. */
  'gateway:resumed': { paused_ms: number };
  /** A leased step starts (after pacing let it). */
  'step:start': StepInfo;
  /** The step completed and the kernel accepted it. */
  'step:done': StepInfo & { run_state: string; next_step: string | null; usage: Usage; duration_ms: number };
  /** The step failed and was reported (`outcome` null when the report itself failed). */
  'step:error': StepInfo & {
    error: { code: string; message: string };
    deterministic: boolean;
    /** The kernel's answer to fail (null when it could not be told): the step's outcome and the run's state. */
    outcome: string | null;
    run_state: string | null;
    usage: Usage;
    duration_ms: number;
    /** Only for a bug in the worker (code `internal`): its stack, for the log, never sent to the kernel. */
    stack?: string;
  };
  /**
   * The step ran, but its completion could not be reported before the lease ran out (the kernel
   * out of reach): the lease expires and the step is handed out again, its tool calls then
   * answered from the gateway's idempotency store.
   */
  'step:unreported': StepInfo & { error: { code: string; message: string }; usage: Usage; duration_ms: number };
  /** An action needs approval: the kernel parked the run and took the lease back. */
  'step:parked': StepInfo & { action_id: string; approval_id: string | null; usage: Usage };
  /** The lease ended under the step (410: parked, abandoned, expired): it stopped at once. */
  'step:lost': StepInfo & { reason: string };
  /** Something the step did: a tool call, a model call, a proposal, a redaction. */
  'step:activity': StepInfo & { activity: StepActivity };
}

export type WorkerEventName = keyof WorkerEventMap;

/** A minimal typed wrapper over node:events. */
export class TypedEmitter<M extends { [K in keyof M]: unknown }> {
  private readonly ee = new EventEmitter();

  constructor() {
    this.ee.setMaxListeners(100);
  }

  on<K extends keyof M & string>(event: K, listener: (payload: M[K]) => void): this {
    this.ee.on(event, listener as (p: unknown) => void);
    return this;
  }

  once<K extends keyof M & string>(event: K, listener: (payload: M[K]) => void): this {
    this.ee.once(event, listener as (p: unknown) => void);
    return this;
  }

  off<K extends keyof M & string>(event: K, listener: (payload: M[K]) => void): this {
    this.ee.off(event, listener as (p: unknown) => void);
    return this;
  }

  protected emit<K extends keyof M & string>(event: K, payload: M[K]): void {
    for (const l of this.ee.rawListeners(event)) {
      try {
        (l as (p: M[K]) => void)(payload);
      } catch {
        /* a listener's bug must not stop a step */
      }
    }
  }
}

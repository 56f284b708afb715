/**
 * The worker runtime (interface 2.6, 4.1; decisions §6): long-polls the kernel for the step
 * kinds it serves, runs each leased step with the executor of its kind while heartbeating every
 * `heartbeat_seconds`, and reports the outcome with its usage: complete, fail (with
 * `deterministic` set truthfully) or nothing when the lease ended under it. A heartbeat answered
 * 410 (the run was parked or abandoned, or the lease expired) aborts the step at once through
 * its AbortSignal.
 *
 * `concurrency` slots poll independently; bundle pacing (`max_concurrent`, `min_interval_ms`
 * per kind) is enforced across them. stop() stops polling, lets running steps finish within a
 * grace period, then aborts the rest and fails them as `worker_shutdown` (not deterministic, so
 * the kernel retries them elsewhere).
 */
import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { globalRedactor } from '../log/logger.js';
import { LEASE_KINDS, type LeaseKind } from '../types.js';
import { abortReason, LeaseLostError, StepError } from './errors.js';
import { TypedEmitter, type StepInfo, type WorkerEventMap } from './events.js';
import { executeAction } from './executors/action.js';
import { executeCompensation } from './executors/compensation.js';
import { executeModel } from './executors/model.js';
import { executeTool } from './executors/tool.js';
import { GatewayClient } from './gateway-client.js';
import { urlHasCredentials, withoutCredentials } from './http.js';
import { KernelClient } from './kernel-client.js';
import { PacingGate } from './pacing.js';
import type { Provider } from './providers/provider.js';
import { chargeableUsage } from './providers/usage.js';
import { leaseKind, StepRuntime } from './step-runtime.js';
import { completePriorEvents } from './prior-events.js';
import type { Lease, StepOutcome } from './types.js';
import { cutText } from '../encoding/cut-text.js';

/** Every kind a worker can serve: every kind of lease. */
export const ALL_KINDS = LEASE_KINDS;

/** How long the reports of steps a stop aborted may keep asking an unreachable kernel. */
export const SHUTDOWN_REPORT_MS = 3000;

/** How long a lease confirmation before a gateway retry waits for the kernel. */
const CONFIRM_LEASE_MS = 5000;

export interface WorkerOptions {
  /** Kernel address, e.g. http://127.0.0.1:7401 (or pass `kernel`). */
  kernelUrl?: string;
  /** Gateway address, e.g. http://127.0.0.1:7402 (or pass `gateway`). */
  gatewayUrl?: string;
  /** Bearer token for both (SVC_TOKEN). (Default: none) */
  token?: string;
  kernel?: KernelClient;
  gateway?: GatewayClient;
  provider: Provider;
  /** (Default: `<hostname>-<pid>-<random>`) */
  workerId?: string;
  /** Kinds to lease. (Default: model, tool, action, compensation) */
  kinds?: readonly LeaseKind[];
  /** Steps run at once. (Default: 1) */
  concurrency?: number;
  /** Lease ttl asked for. (Default: 60) */
  ttlSeconds?: number;
  /** Long-poll wait per lease request, at most 30. (Default: 20) */
  waitSeconds?: number;
  /** Most model answers in one step. (Default: 16) */
  maxTurns?: number;
  /** First and longest pause after the kernel could not be reached, ms. (Default: 500, 10000) */
  pollBackoffMs?: { initial: number; max: number };
}

type Executor = (rt: StepRuntime) => Promise<StepOutcome>;

const EXECUTORS: Record<string, Executor> = {
  tool: executeTool,
  action: executeAction,
  compensation: executeCompensation,
  model: executeModel,
};

export function defaultWorkerId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

interface InFlight {
  info: StepInfo;
  abort: AbortController;
}

/** The longest delay setTimeout takes (2^31-1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A throw that is not a StepError is a bug in the worker: the run's error says so in one line
 * (the error's name and message), and the stack goes to the worker's log with `step:error`.
 */
function unexpected(err: unknown): StepError {
  const e = err as Error | undefined;
  const what = e instanceof Error ? `${e.name}: ${e.message}` : String(err);
  return new StepError('internal', `worker bug: ${what} (the stack is in svc worker's log)`, false);
}

export class Worker extends TypedEmitter<WorkerEventMap> {
  readonly workerId: string;
  readonly kinds: readonly LeaseKind[];
  readonly concurrency: number;
  readonly kernel: KernelClient;
  readonly gateway: GatewayClient;
  readonly provider: Provider;
  private readonly ttlSeconds: number;
  private readonly waitSeconds: number;
  private readonly backoff: { initial: number; max: number };
  private readonly gate = new PacingGate();
  private readonly inflight = new Map<string, InFlight>();
  private readonly pollAbort = new AbortController();
  private loops: Promise<void>[] = [];
  private running = false;
  private stopping: Promise<void> | null = null;
  /** Epoch ms past which an unreachable kernel is no longer asked again (set by a stop's abort). */
  private reportDeadline = Infinity;
  /** Aborted at `reportDeadline`: ends a report's request still waiting then. */
  private readonly reportsCut = new AbortController();
  private wake: Array<() => void> = [];

  constructor(private readonly opts: WorkerOptions) {
    super();
    if (!opts.kernel && !opts.kernelUrl) throw new Error('worker: a kernel URL is required');
    if (!opts.gateway && !opts.gatewayUrl) throw new Error('worker: a gateway URL is required');
    // fetch refuses every request to such a URL, and each failure would quote it, password and
    // all, into the log and the run's events. The URL itself is not repeated here either.
    for (const [name, url] of [['kernel', opts.kernelUrl], ['gateway', opts.gatewayUrl]] as const) {
      if (url !== undefined && urlHasCredentials(url)) throw new Error(`worker: the ${name} URL must not carry a user name or password (user:password@host); the token is sent as a bearer header`);
    }
    this.kernel = opts.kernel ?? new KernelClient({ baseUrl: opts.kernelUrl!, token: opts.token });
    this.gateway = opts.gateway ?? new GatewayClient({ baseUrl: opts.gatewayUrl!, token: opts.token });
    this.gateway.onOutage = (e) => this.emit('gateway:unreachable', e);
    // Idle slots' long polls would each take one more step into the outage: ended now, before
    // the kernel hands them a lease (a lease whose poll went away is released unspent).
    this.gateway.onOutOfReach = () => {
      for (const poll of this.polls) poll.abort(new StepError('network_error', 'the gateway is out of reach'));
      this.notify();
    };
    this.provider = opts.provider;
    this.workerId = opts.workerId ?? defaultWorkerId();
    this.kinds = opts.kinds && opts.kinds.length > 0 ? [...new Set(opts.kinds)] : ALL_KINDS;
    this.concurrency = Math.max(1, Math.floor(opts.concurrency ?? 1));
    this.ttlSeconds = opts.ttlSeconds ?? 60;
    this.waitSeconds = Math.min(30, Math.max(0, opts.waitSeconds ?? 20));
    this.backoff = opts.pollBackoffMs ?? { initial: 500, max: 10_000 };
    // Each slot's poll listens to this signal while it waits (pollOnce): as many listeners as
    // slots, legitimately; more would be a leak and still warns.
    setMaxListeners(this.concurrency + 10, this.pollAbort.signal);
  }

  /** Steps running now. */
  get inFlight(): number {
    return this.inflight.size;
  }

  /** Starts `concurrency` polling slots. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.emit('worker:start', {
      worker_id: this.workerId,
      kinds: [...this.kinds],
      concurrency: this.concurrency,
      provider: this.provider.name,
      kernel_url: withoutCredentials(this.kernel.peer.baseUrl),
      gateway_url: withoutCredentials(this.gateway.peer.baseUrl),
    });
    // A gateway that cannot be reached now starts the slots paused (svc-worker(1) DESCRIPTION).
    const reached = this.gateway.reachAtStart(this.pollAbort.signal);
    for (let i = 0; i < this.concurrency; i++) this.loops.push(reached.then(() => this.slot()));
  }

  /**
   * Stops polling and waits for running steps; after `graceMs` the rest are aborted and failed
   * as `worker_shutdown`. Calling it again with a shorter grace shortens the wait.
   */
  stop(opts: { graceMs?: number } = {}): Promise<void> {
    const graceMs = opts.graceMs ?? 30_000;
    if (this.stopping) {
      if (graceMs <= 0) this.abortAll();
      return this.stopping;
    }
    this.emit('worker:stopping', { worker_id: this.workerId, in_flight: this.inflight.size, grace_ms: graceMs });
    this.pollAbort.abort(new StepError('worker_shutdown', 'worker is stopping'));
    this.notify();
    this.stopping = (async () => {
      const timer = setTimeout(() => this.abortAll(), graceMs);
      try {
        if (graceMs <= 0) this.abortAll();
        await Promise.allSettled(this.loops);
      } finally {
        clearTimeout(timer);
      }
      this.running = false;
      this.emit('worker:stop', { worker_id: this.workerId });
    })();
    return this.stopping;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop({ graceMs: 0 });
  }

  /**
   * Aborts every running step for a stop. From here their reports to the kernel get
   * `SHUTDOWN_REPORT_MS` more, not the rest of their leases: with the kernel down, a report
   * that waited for the lease's expiry would hold the exit for up to the lease's ttl (an
   * hour at most) after the operator asked the worker to go. A report that does not get
   * through leaves the lease to expire; the kernel then hands the step out again.
   */
  private abortAll(): void {
    if (this.reportDeadline === Infinity) {
      this.reportDeadline = performance.now() + SHUTDOWN_REPORT_MS;
      // A kernel that takes the connection and never answers would hold a report (and the
      // exit) for the HTTP client's own limits, minutes: the reports' requests end here too.
      setTimeout(() => this.reportsCut.abort(new StepError('network_error', `the kernel did not take the report within ${SHUTDOWN_REPORT_MS} ms of the stop`)), SHUTDOWN_REPORT_MS).unref();
    }
    for (const f of this.inflight.values()) f.abort.abort(new StepError('worker_shutdown', 'worker stopped while the step ran'));
  }

  private notify(): void {
    const w = this.wake;
    this.wake = [];
    for (const f of w) f();
  }

  private waitForChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(t);
        self.wake = self.wake.filter((f) => f !== done);
        resolve();
      }
      this.wake.push(done);
    });
  }

  /** Kinds worth asking for now: those not held back by a saturated pacing limit. */
  private pollKinds(): LeaseKind[] {
    return this.kinds.filter((k) => !this.gate.saturatedWhere((key) => key.endsWith(`\u0000${k}`)));
  }

  /**
   * The slots' shared retry of a kernel that cannot be reached: one outage, one backoff that
   * doubles, and one poll:error a step (64 slots logged 64 lines every 10 s, and came back all
   * at once).
   */
  private pollRetry = { delay: 0, until: 0 };

  private async pollFailed(err: unknown): Promise<void> {
    const now = performance.now(); // monotonic: a clock stepped back must not hold the slots
    const r = this.pollRetry;
    if (now >= r.until) {
      // The first slot to fail after the last step ran out reports the next step.
      r.delay = r.delay === 0 ? this.backoff.initial : Math.min(this.backoff.max, r.delay * 2);
      r.until = now + r.delay;
      this.emit('poll:error', { error: withoutCredentials((err as Error).message), retry_in_ms: r.delay });
    }
    // Each slot with a jitter of its own (up to a fifth of the step, at most 1 s), so a kernel
    // that comes back is not asked by all of them in the same instant.
    await this.waitForChange(r.until - now + Math.random() * Math.min(1000, r.delay / 5));
  }

  /**
   * While the gateway is out of reach (a request spent its whole wait on it), one prober asks
   * its /v1/health with a doubling wait and the slots take no new step: every kind needs the
   * gateway, and each step leased meanwhile spent an attempt on the outage (about 80 s each;
   * a four-minute outage quarantined runs at the default three attempts).
   */
  private gatewayWait: Promise<void> | null = null;

  private untilGatewayAnswers(): Promise<void> {
    this.gatewayWait ??= (async () => {
      const since = performance.now(); // paused_ms is a duration: monotonic, as step durations
      this.emit('gateway:paused', { error: withoutCredentials(this.gateway.outOfReach ?? 'out of reach') });
      let delay = this.backoff.initial;
      while (!this.pollAbort.signal.aborted) {
        await this.waitForChange(delay);
        if (this.pollAbort.signal.aborted) return;
        if (await this.gateway.probe(this.pollAbort.signal).catch(() => false)) {
          this.emit('gateway:resumed', { paused_ms: Math.round(performance.now() - since) });
          return;
        }
        delay = Math.min(this.backoff.max, delay * 2);
      }
    })().finally(() => {
      this.gatewayWait = null;
    });
    return this.gatewayWait;
  }

  private async slot(): Promise<void> {
    while (!this.pollAbort.signal.aborted) {
      if (this.gateway.outOfReach !== null) {
        await this.untilGatewayAnswers();
        continue;
      }
      const kinds = this.pollKinds();
      if (kinds.length === 0) {
        await this.waitForChange(1000);
        continue;
      }
      let lease: Lease | null;
      try {
        lease = await this.pollOnce(kinds);
        this.pollRetry = { delay: 0, until: 0 };
      } catch (err) {
        if (this.pollAbort.signal.aborted) break;
        if (this.gateway.outOfReach !== null) continue; // ended for the pause: no poll error
        await this.pollFailed(err);
        continue;
      }
      if (lease) await this.runLease(lease);
      // No long poll (--wait-seconds 0): an idle answer is asked again after a pause, not at once.
      else if (this.waitSeconds === 0) await this.waitForChange(this.backoff.initial);
    }
  }

  /**
   * One POST /leases under a signal of its own, tied to the worker's: fetch leaves a listener
   * on the signal it is given, and one long-lived signal collected one per poll (1,500 in
   * 30 s of idle polling at --concurrency 64, MaxListenersExceededWarning).
   */
  private async pollOnce(kinds: LeaseKind[]): Promise<Lease | null> {
    const poll = new AbortController();
    const stop = () => poll.abort(this.pollAbort.signal.reason);
    if (this.pollAbort.signal.aborted) stop();
    else this.pollAbort.signal.addEventListener('abort', stop, { once: true });
    this.polls.add(poll);
    try {
      return await this.kernel.lease({ worker_id: this.workerId, kinds, ttl_seconds: this.ttlSeconds, wait_seconds: this.waitSeconds }, poll.signal);
    } finally {
      this.polls.delete(poll);
      this.pollAbort.signal.removeEventListener('abort', stop);
    }
  }

  /** The long polls under way, so a gateway found out of reach can end them. */
  private readonly polls = new Set<AbortController>();

  /**
   * Runs one leased step to its end and reports it. Never throws: every outcome is an event.
   * Public so a caller holding a lease (tests, a one-shot runner) can drive it directly.
   */
  async runLease(lease: Lease): Promise<void> {
    const started = performance.now(); // duration_ms: a wall clock stepped back read minus an hour
    const kind = leaseKind(lease);
    const info: StepInfo = { lease_id: lease.lease_id, run_id: lease.run_id, step: lease.step, kind, attempt: lease.attempt };
    const abort = new AbortController();
    this.inflight.set(lease.lease_id, { info, abort });
    // The lease's expiry as heartbeats move it: calls under the lease retry an unreachable
    // kernel until then (a restart costs a pause, not the attempt and its model answers).
    // held.expiresAt and reportDeadline are on the monotonic clock (performance.now()): a wall
    // clock stepped back an hour held a lease lost in a partition for an hour more, the step
    // running on and its reports retried while another worker had the step. `until` gives the
    // deadline in epoch ms as the wall clock reads now, which is what the clients compare.
    const held = { expiresAt: localExpiry(lease, performance.now(), monotonicOf(lease.expires_at)) };
    const until = () => wallOf(Math.min(held.expiresAt, this.reportDeadline));
    const stopHeartbeat = this.heartbeat(lease, abort, held);
    const timeoutS = Number(lease.step_def?.timeout_seconds);
    let timeout: NodeJS.Timeout | null = null;
    const rt = new StepRuntime(lease, abort.signal, {
      kernel: this.kernel,
      gateway: this.gateway,
      provider: this.provider,
      workerId: this.workerId,
      maxTurns: this.opts.maxTurns,
      onActivity: (activity) => this.emit('step:activity', { ...info, activity }),
      leaseExpiresAt: until,
      confirmLease: () => this.confirmLease(lease, abort, held),
    });
    let release: (() => void) | null = null;
    try {
      const bundle = lease.context?.run?.bundle ?? '';
      // The grace of a stop is for steps that run; one still waiting for its slot does not
      // start, and stop() ends its wait at once rather than when the slot comes due.
      const notStarted = () => new StepError('worker_shutdown', 'the worker stopped before the step started (it waited for its pacing slot)', false);
      try {
        release = await this.gate.acquire(`${bundle}\u0000${kind}`, lease.context?.pacing?.[kind], AbortSignal.any([abort.signal, this.pollAbort.signal]));
      } catch (err) {
        throw this.stopping && !abort.signal.aborted ? notStarted() : err;
      }
      if (this.stopping) throw notStarted();
      // timeout_seconds bounds the attempt itself: a step waiting for its pacing slot has not
      // started, and must not time out (and spend an attempt) without having run.
      if (Number.isFinite(timeoutS) && timeoutS > 0) {
        // setTimeout fires at once (with a warning on stderr) past 2^31-1 ms: about 24.8 days is as long as it waits.
        timeout = setTimeout(() => abort.abort(new StepError('step_timeout', `step ran longer than its timeout of ${timeoutS} s`)), Math.min(timeoutS * 1000, MAX_TIMER_MS));
      }
      this.emit('step:start', info);
      await completePriorEvents(this.kernel, lease, { until, signal: abort.signal });
      const executor = EXECUTORS[kind];
      if (!executor) throw new StepError('step_invalid', `this worker cannot run steps of kind "${kind}"`, true);
      const outcome = await executor(rt);
      if (abort.signal.aborted) throw abortReason(abort.signal);
      if (outcome.type === 'parked') {
        this.emit('step:parked', { ...info, action_id: outcome.action_id, approval_id: outcome.approval_id, usage: outcome.usage });
        return;
      }
      // The usage as the kernel is told it (kernel.complete sends the same): what the log shows is what was charged.
      const usage = chargeableUsage(outcome.usage);
      let r: Awaited<ReturnType<KernelClient['complete']>>;
      try {
        r = await this.kernel.complete(lease.lease_id, outcome.output, usage, { until, signal: this.reportsCut.signal });
      } catch (reportErr) {
        // The step ran and its completion found no kernel to the lease's end: said as such (it
        // read as a failed step), and not reported as a failure, which would run it again.
        if (!(reportErr instanceof StepError) || reportErr.code !== 'network_error') throw reportErr;
        this.emit('step:unreported', { ...info, error: { code: reportErr.code, message: withoutCredentials(reportErr.message) }, usage, duration_ms: Math.round(performance.now() - started) });
        return;
      }
      this.emit('step:done', { ...info, run_state: r.run_state, next_step: r.next_step ?? null, usage, duration_ms: Math.round(performance.now() - started) });
    } catch (caught) {
      const err = abort.signal.aborted && !(caught instanceof StepError && caught.code === 'output_invalid') ? abortReason(abort.signal) : caught;
      if (err instanceof LeaseLostError) {
        this.emit('step:lost', { ...info, reason: err.message });
        return;
      }
      const e = err instanceof StepError ? err : unexpected(err);
      // The message goes into the run's permanent events: no secret, and no URL's password.
      const error = { code: e.code, message: cutText(withoutCredentials(globalRedactor.redact(e.message)), 2000) };
      // A bug's stack is for the worker's own log, never the run's events (read by every
      // operator of the run, kept for ever, and holding this machine's install paths).
      const stack = err instanceof StepError ? undefined : withoutCredentials(globalRedactor.redact(String((err as Error)?.stack ?? err)));
      const usage = chargeableUsage(rt.usage);
      try {
        const r = await this.kernel.fail(lease.lease_id, error, e.deterministic, usage, { until, signal: this.reportsCut.signal });
        this.emit('step:error', { ...info, error, deterministic: e.deterministic, outcome: r.outcome ?? null, run_state: r.run_state ?? null, usage, duration_ms: Math.round(performance.now() - started), ...(stack ? { stack } : {}) });
      } catch (reportErr) {
        if (reportErr instanceof LeaseLostError) this.emit('step:lost', { ...info, reason: reportErr.message });
        else this.emit('step:error', { ...info, error, deterministic: e.deterministic, outcome: null, run_state: null, usage, duration_ms: Math.round(performance.now() - started), ...(stack ? { stack } : {}) });
      }
    } finally {
      if (timeout) clearTimeout(timeout);
      stopHeartbeat();
      release?.();
      this.inflight.delete(lease.lease_id);
      this.notify();
    }
  }

  /**
   * One heartbeat now: a 410 aborts the step and throws; a kernel that does not answer says
   * nothing either way (the timed heartbeats and the lease's expiry deal with that).
   */
  private async confirmLease(lease: Lease, abort: AbortController, held: { expiresAt: number }): Promise<void> {
    try {
      const sent = performance.now();
      // Bounded: a kernel that never answers must not hold the step (or a stop) here.
      const r = await this.kernel.heartbeat(lease.lease_id, AbortSignal.any([abort.signal, AbortSignal.timeout(CONFIRM_LEASE_MS)]));
      held.expiresAt = localExpiry(lease, sent, monotonicOf(r?.expires_at), held.expiresAt);
    } catch (err) {
      if (!(err instanceof LeaseLostError)) return;
      abort.abort(err);
      throw err;
    }
  }

  /** Heartbeats every heartbeat_seconds; aborts the step on 410 or once the lease has run out. */
  private heartbeat(lease: Lease, abort: AbortController, held: { expiresAt: number }): () => void {
    // heartbeat_seconds is ttl/3 rounded down but at least 1 (decisions §6), which at a ttl of
    // 1 or 2 s lands on or near the expiry itself: never wait more than a third of the ttl.
    const ttlMs = (Number(lease.ttl_seconds) || (held.expiresAt - performance.now()) / 1000) * 1000;
    const every = Math.max(250, Math.min(Math.max(1, Number(lease.heartbeat_seconds) || 1) * 1000, Number.isFinite(ttlMs) ? ttlMs / 3 : Infinity));
    let busy = false;
    const timer = setInterval(() => {
      if (busy || abort.signal.aborted) return;
      busy = true;
      const sent = performance.now();
      this.kernel
        .heartbeat(lease.lease_id, AbortSignal.timeout(Math.max(every, 1000))) // a hung one must not stop the next
        .then((r) => {
          held.expiresAt = localExpiry(lease, sent, monotonicOf(r?.expires_at), held.expiresAt);
        })
        .catch((err: unknown) => {
          if (err instanceof LeaseLostError) abort.abort(err);
          else if (Number.isFinite(held.expiresAt) && performance.now() > held.expiresAt) abort.abort(new LeaseLostError(lease.lease_id, `lease ${lease.lease_id} ran out while heartbeats failed`));
        })
        .finally(() => {
          busy = false;
        });
    }, every);
    // The expiry is also watched on its own timer: a heartbeat that hangs (a partition drops
    // its packets) fails only after its own timeout, and the next one is sent only at the next
    // tick, so a check made when one fails noticed the lease gone up to two heartbeat periods
    // late (a ttl of 10: 2 s; of 50: 14 to 30 s; 60 lands on time only because its expiry
    // falls where a heartbeat's timeout ends), while the kernel had handed the step to another
    // worker. Fired at the expiry, re-armed when a heartbeat moved it.
    let expiry: NodeJS.Timeout | null = null;
    const watchExpiry = () => {
      if (abort.signal.aborted || !Number.isFinite(held.expiresAt)) return;
      expiry = setTimeout(
        () => {
          if (abort.signal.aborted) return;
          if (performance.now() >= held.expiresAt) abort.abort(new LeaseLostError(lease.lease_id, `lease ${lease.lease_id} ran out while heartbeats failed`));
          else watchExpiry();
        },
        Math.min(Math.max(0, held.expiresAt - performance.now()) + 1, MAX_TIMER_MS),
      );
    };
    watchExpiry();
    return () => {
      clearInterval(timer);
      if (expiry) clearTimeout(expiry);
    };
  }
}

/**
 * When a lease runs out, on this machine's clock. The kernel's `expires_at` is on the kernel's
 * clock: a worker whose clock runs ahead by about a ttl would take a live lease for lost (one
 * failed heartbeat aborting the step, reports to a restarting kernel given up). The kernel
 * sets the expiry to its now plus the lease's ttl when it answers, so `since` (when the
 * request was sent, or the lease received) plus the ttl is the same instant, give or take the
 * request's flight (and, for a new lease, the kernel's commit before it answered). Without a
 * ttl (a kernel that does not send it), the kernel's time as given (an ISO string, or a number
 * already on the clock `since` is on: the worker passes the monotonic clock). Never earlier than
 * `previous`: of two heartbeats answered out of order, the later one sent counts.
 */
export function localExpiry(lease: Pick<Lease, 'ttl_seconds'>, since: number, kernelExpiresAt: unknown, previous = NaN): number {
  const ttl = Number(lease.ttl_seconds);
  const parsed = typeof kernelExpiresAt === 'string' ? Date.parse(kernelExpiresAt) : typeof kernelExpiresAt === 'number' ? kernelExpiresAt : NaN;
  const next = Number.isFinite(ttl) && ttl > 0 ? since + ttl * 1000 : parsed;
  if (!Number.isFinite(next)) return previous;
  return Number.isFinite(previous) && previous > next ? previous : next;
}

/** The kernel's `expires_at` (ISO 8601) on this process's monotonic clock; NaN when not a time. */
function monotonicOf(iso: unknown): number {
  const t = typeof iso === 'string' ? Date.parse(iso) : NaN;
  return Number.isFinite(t) ? t - Date.now() + performance.now() : NaN;
}

/** A monotonic deadline as epoch ms on the wall clock as it reads now (Infinity stays). */
function wallOf(monotonic: number): number {
  return monotonic === Infinity ? Infinity : Date.now() + (monotonic - performance.now());
}

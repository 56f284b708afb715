/**
 * Periodic background work of the run engine: expiring leases whose time ran out (decisions §6)
 * so their steps are handed out again even when no worker touches them. One tick at a time;
 * a failing tick is logged and the next one runs. The same failure every tick (a store that
 * cannot be read) is logged once every 10 s, not twice a second.
 */
import type { Logger } from '../log/logger.js';
import { LogThrottle } from '../log/throttle.js';

const FAILURE_LOG_MS = 10_000;

export class Sweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly failureLog = new LogThrottle(FAILURE_LOG_MS);

  constructor(
    private readonly tick: () => Promise<unknown>,
    /** Milliseconds between ticks; 0: no timer, ticks only through runOnce. */
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.timer || this.intervalMs <= 0) return;
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
  }

  /** Runs one tick now unless one is already running. */
  runOnce(): Promise<void> {
    this.running ??= this.tick()
      .then(() => undefined)
      .catch((err: unknown) => {
        const e = err as (Error & { code?: unknown }) | undefined;
        const unlogged = this.failureLog.pass(typeof e?.code === 'string' ? e.code : String(e?.message ?? err));
        if (unlogged !== null) this.logger.error('sweeper tick failed', { err: e?.stack ?? String(err), ...(unlogged > 0 ? { not_logged_before: unlogged } : {}) });
      })
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /** Stops the timer and waits for a running tick. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}

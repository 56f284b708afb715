/**
 * Periodic background work of the run engine: expiring leases whose time ran out (decisions §6)
 * so their steps are handed out again even when no worker touches them. One tick at a time;
 * a failing tick is logged and the next one runs.
 */
import type { Logger } from '../log/logger.js';

export class Sweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

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
      .catch((err: unknown) => this.logger.error('sweeper tick failed', { err: (err as Error)?.stack ?? String(err) }))
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

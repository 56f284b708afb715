/**
 * Wakes long-polling lease requests when work appears (decisions §6 `wait_seconds`): a run is
 * created, a step becomes ready, a lease expires, a run resumes. In-process and event driven,
 * so an idle worker costs a pending promise, not a polling loop.
 */
import type { LeaseKind } from '../types.js';

interface Waiter {
  kinds: ReadonlySet<LeaseKind>;
  wake: () => void;
}

/** Per-kind notification counters; compare two stamps to learn whether work appeared between them. */
export type NotifyStamp = Readonly<Record<LeaseKind, number>>;

export class WorkNotifier {
  private readonly waiters = new Set<Waiter>();
  private readonly counts: Record<LeaseKind, number> = { model: 0, tool: 0, action: 0, compensation: 0 };

  /** The counters now; pass to `wait` so a notification between a look and the wait is not lost. */
  stamp(): NotifyStamp {
    return { ...this.counts };
  }

  /** Number of requests currently waiting (metrics and tests). */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * Resolves when work of one of `kinds` may be available, after `timeoutMs`, or when `signal`
   * aborts, whichever comes first. Never rejects.
   */
  wait(kinds: readonly LeaseKind[], timeoutMs: number, signal?: AbortSignal, since?: NotifyStamp): Promise<void> {
    if (timeoutMs <= 0 || signal?.aborted) return Promise.resolve();
    if (since && kinds.some((k) => this.counts[k] !== since[k])) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const waiter: Waiter = {
        kinds: new Set(kinds),
        wake: () => {
          this.waiters.delete(waiter);
          if (timer) clearTimeout(timer);
          signal?.removeEventListener('abort', waiter.wake);
          resolve();
        },
      };
      this.waiters.add(waiter);
      timer = setTimeout(waiter.wake, timeoutMs);
      signal?.addEventListener('abort', waiter.wake, { once: true });
    });
  }

  /** Wakes every waiter that serves `kind` (they race for the work; losers wait again). */
  notify(kind: LeaseKind): void {
    this.counts[kind] += 1;
    for (const w of [...this.waiters]) if (w.kinds.has(kind)) w.wake();
  }

  /**
   * Wakes everyone (shutdown). The counters move too, so a request that took its stamp before
   * and had not started waiting yet (it was between its look for work and `wait`) does not
   * sleep through the shutdown and hold the drain for its whole `wait_seconds`.
   */
  wakeAll(): void {
    for (const kind of Object.keys(this.counts) as LeaseKind[]) this.counts[kind] += 1;
    for (const w of [...this.waiters]) w.wake();
  }
}

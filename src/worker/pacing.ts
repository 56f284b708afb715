/**
 * Bundle pacing (decisions §4 `pacing`), enforced per worker: for each bundle and step kind, at
 * most `max_concurrent` steps run at once and two starts are at least `min_interval_ms` apart.
 * Waiters are served in arrival order. The pacing of a key is the latest one a lease carried.
 */
import type { KindPacing } from './types.js';

interface KeyState {
  pacing: KindPacing;
  running: number;
  lastStart: number;
  queue: Array<{ resolve: (release: () => void) => void; reject: (err: unknown) => void; signal?: AbortSignal; onAbort?: () => void }>;
  timer: NodeJS.Timeout | null;
}

function sane(p: KindPacing | undefined): KindPacing {
  const max = Number(p?.max_concurrent);
  const interval = Number(p?.min_interval_ms);
  return {
    max_concurrent: Number.isFinite(max) && max >= 1 ? Math.floor(max) : undefined,
    min_interval_ms: Number.isFinite(interval) && interval > 0 ? interval : 0,
  };
}

export class PacingGate {
  private keys = new Map<string, KeyState>();

  /**
   * `now` is monotonic by default: the wall clock stepped back (NTP, a VM resumed, an operator
   * setting the date) would otherwise make `lastStart` lie in the future and hold every key's
   * next step for as long as the clock went back, even without any pacing configured.
   */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Waits until a step under `key` may start; resolves to its release function. */
  acquire(key: string, pacing: KindPacing | undefined, signal?: AbortSignal): Promise<() => void> {
    let st = this.keys.get(key);
    if (!st) {
      st = { pacing: sane(pacing), running: 0, lastStart: -Infinity, queue: [], timer: null };
      this.keys.set(key, st);
    } else {
      st.pacing = sane(pacing);
    }
    const state = st;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const waiter: KeyState['queue'][number] = { resolve, reject, signal };
      if (signal) {
        waiter.onAbort = () => {
          const i = state.queue.indexOf(waiter);
          if (i >= 0) state.queue.splice(i, 1);
          reject(signal.reason);
          this.pump(key, state);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      state.queue.push(waiter);
      this.pump(key, state);
    });
  }

  /** True when a step of `key` would have to wait right now. */
  saturated(key: string): boolean {
    const st = this.keys.get(key);
    if (!st) return false;
    return st.pacing.max_concurrent !== undefined && st.running >= st.pacing.max_concurrent;
  }

  /** True when some key matching `pred` is at its max_concurrent. */
  saturatedWhere(pred: (key: string) => boolean): boolean {
    for (const key of this.keys.keys()) if (pred(key) && this.saturated(key)) return true;
    return false;
  }

  /** Steps of `key` running now. */
  running(key: string): number {
    return this.keys.get(key)?.running ?? 0;
  }

  private pump(key: string, st: KeyState): void {
    if (st.timer) {
      clearTimeout(st.timer);
      st.timer = null;
    }
    while (st.queue.length > 0) {
      if (st.pacing.max_concurrent !== undefined && st.running >= st.pacing.max_concurrent) return;
      const wait = st.lastStart + (st.pacing.min_interval_ms ?? 0) - this.now();
      if (wait > 0) {
        st.timer = setTimeout(() => this.pump(key, st), wait);
        return;
      }
      const w = st.queue.shift()!;
      if (w.signal && w.onAbort) w.signal.removeEventListener('abort', w.onAbort);
      st.running += 1;
      st.lastStart = this.now();
      let released = false;
      w.resolve(() => {
        if (released) return;
        released = true;
        st.running -= 1;
        this.pump(key, st);
      });
    }
  }
}

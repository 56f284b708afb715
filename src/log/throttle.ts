/**
 * At most `burst` log lines per key every `ms`; the lines held back meanwhile are counted and
 * reported by the next one let through. For failures that every request or call meets while
 * they last (a full disk, a caller whose every event is refused): one line each would fill the
 * log as fast as clients ask, and the metrics and health already say how often and how long.
 */
export class LogThrottle {
  private readonly windows = new Map<string, { since: number; lines: number; unlogged: number }>();

  constructor(
    private readonly ms: number,
    /** Lines let through per key in each window. */
    private readonly burst = 1,
    /** Keys remembered at most (they come from fault codes and reasons; a bound all the same). */
    private readonly maxKeys = 100,
  ) {}

  /**
   * Null when `key` had its lines in this window (counted); else how many were held back
   * before this one. `now` is monotonic by default: a wall clock stepped back would keep a
   * key silent until it caught up. Forgetting keys at the bound forgets their counts too.
   */
  pass(key: string, now: number = performance.now()): number | null {
    const w = this.windows.get(key);
    // A `now` before the window's start (a wall clock passed in, stepped back) starts a new one.
    if (w && now >= w.since && now - w.since < this.ms) {
      if (w.lines >= this.burst) {
        w.unlogged++;
        return null;
      }
      w.lines++;
      return 0; // nothing is held back while the window still has lines
    }
    if (!w && this.windows.size >= this.maxKeys) this.windows.clear();
    this.windows.set(key, { since: now, lines: 1, unlogged: 0 });
    return w?.unlogged ?? 0;
  }
}

/** A throttle per logger (a listener's, a gateway's), made on first use. */
export function throttleFor(map: WeakMap<object, LogThrottle>, owner: object, ms: number): LogThrottle {
  let t = map.get(owner);
  if (!t) map.set(owner, (t = new LogThrottle(ms)));
  return t;
}

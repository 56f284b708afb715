/**
 * Waits between tries of a peer that did not answer: doubling from `first` to `max`, for as
 * long as the next wait ends before a deadline. Shared by the worker's kernel calls under a
 * lease and its gateway calls.
 */
import { delayUnlessAborted } from './errors.js';

export class Backoff {
  private wait: number;

  constructor(
    private readonly ms: { readonly first: number; readonly max: number },
    /** The clock `deadline` is on: epoch ms (a lease's expiry), or performance.now() for a budget counted here. */
    private readonly now: () => number = Date.now,
  ) {
    this.wait = ms.first;
  }

  /** Waits the next wait, or throws `failure` when that wait would reach `deadline` (on `now`'s clock). */
  async next(failure: Error, deadline: number, signal?: AbortSignal): Promise<void> {
    if (this.now() + this.wait >= deadline) throw failure;
    await delayUnlessAborted(this.wait, signal);
    this.wait = Math.min(this.wait * 2, this.ms.max);
  }

  /** Back to the first wait (the peer answered). */
  reset(): void {
    this.wait = this.ms.first;
  }
}

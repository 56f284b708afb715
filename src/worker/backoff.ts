/**
 * Waits between tries of a peer that did not answer: doubling from `first` to `max`, for as
 * long as the next wait ends before a deadline. Shared by the worker's kernel calls under a
 * lease and its gateway calls.
 */
import { delayUnlessAborted } from './errors.js';

export class Backoff {
  private wait: number;

  constructor(private readonly ms: { readonly first: number; readonly max: number }) {
    this.wait = ms.first;
  }

  /** Waits the next wait, or throws `failure` when that wait would reach `deadline` (epoch ms). */
  async next(failure: Error, deadline: number, signal?: AbortSignal): Promise<void> {
    if (Date.now() + this.wait >= deadline) throw failure;
    await delayUnlessAborted(this.wait, signal);
    this.wait = Math.min(this.wait * 2, this.ms.max);
  }

  /** Back to the first wait (the peer answered). */
  reset(): void {
    this.wait = this.ms.first;
  }
}

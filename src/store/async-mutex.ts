/** A FIFO lock for async critical sections (one SQLite connection, many awaiting callers). */
export class AsyncMutex {
  private tail: Promise<void> = Promise.resolve();

  /** Runs `fn` once every earlier holder has finished; failures do not poison the queue. */
  run<T>(fn: () => Promise<T> | T): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

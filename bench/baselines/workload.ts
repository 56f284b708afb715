/**
 * The step-cycle workload every queue is measured on: `jobs` cycles of enqueue → dispatch
 * to a worker → complete, with `concurrency` producer loops and `concurrency` worker loops.
 * Cycles per second = jobs / wall time until the last completion.
 */
export interface QueueAdapter {
  name: string;
  /** Creates the queue's state afresh (tables, keys). */
  reset(): Promise<void>;
  enqueue(i: number): Promise<void>;
  /** Starts `concurrency` workers that complete every job; resolves `onDone` per completion. */
  startWorkers(concurrency: number, onDone: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export async function measureCycles(adapter: QueueAdapter, concurrency: number, jobs: number): Promise<number> {
  await adapter.reset();
  let done = 0;
  let resolveAll!: () => void;
  const all = new Promise<void>((r) => (resolveAll = r));
  const t0 = performance.now();
  const stop = await adapter.startWorkers(concurrency, () => {
    if (++done === jobs) resolveAll();
  });
  let next = 0;
  const producers = Array.from({ length: concurrency }, async () => {
    while (next < jobs) await adapter.enqueue(next++);
  });
  await Promise.all(producers);
  await all;
  const elapsed = performance.now() - t0;
  await stop();
  return (jobs / elapsed) * 1000;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

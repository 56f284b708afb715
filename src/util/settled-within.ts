/** How a promise stood when a wait for it ended. */
export type Settled<T> = { state: 'fulfilled'; value: T } | { state: 'rejected'; reason: unknown } | { state: 'pending' };

/** Waits for `p` to settle, at most `ms`, and says how it stood then; never rejects. */
export async function settledWithin<T>(p: Promise<T>, ms: number): Promise<Settled<T>> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<Settled<T>>((resolve) => {
    timer = setTimeout(() => resolve({ state: 'pending' }), ms);
  });
  try {
    return await Promise.race([
      p.then(
        (value): Settled<T> => ({ state: 'fulfilled', value }),
        (reason: unknown): Settled<T> => ({ state: 'rejected', reason }),
      ),
      deadline,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

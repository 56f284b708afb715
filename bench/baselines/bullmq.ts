/** BullMQ 5 on the machine's Redis (no persistence configured there): add → Worker → done. */
import { Queue, Worker } from 'bullmq';
import type { QueueAdapter } from './workload.js';

export function bullmqAdapter(host = '127.0.0.1', port = 6379): QueueAdapter {
  const connection = { host, port, maxRetriesPerRequest: null };
  const name = 'svc-bench';
  const queue = new Queue(name, { connection });
  return {
    name: 'BullMQ',
    async reset() {
      await queue.obliterate({ force: true });
    },
    async enqueue(i) {
      await queue.add('cycle', { i }, { removeOnComplete: true, removeOnFail: true });
    },
    async startWorkers(concurrency, onDone) {
      const worker = new Worker(name, async () => undefined, { connection, concurrency });
      worker.on('completed', () => onDone());
      await worker.waitUntilReady();
      return async () => {
        await worker.close();
      };
    },
    async close() {
      await queue.close();
    },
  };
}

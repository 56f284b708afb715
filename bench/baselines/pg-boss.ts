/** pg-boss 10 on the machine's PostgreSQL: send → fetch → complete (no long-poll: 5 ms idle sleep). */
import PgBoss from 'pg-boss';
import { sleep, type QueueAdapter } from './workload.js';

export function pgBossAdapter(connectionString: string): QueueAdapter {
  const boss = new PgBoss({ connectionString, schema: 'svc_bench_pgboss', supervise: false, schedule: false, migrate: true });
  const queue = 'svc-bench';
  let started = false;
  return {
    name: 'pg-boss',
    async reset() {
      if (!started) {
        boss.on('error', () => {});
        await boss.start();
        started = true;
      }
      await boss.deleteQueue(queue).catch(() => {});
      await boss.createQueue(queue);
    },
    async enqueue(i) {
      await boss.send(queue, { i });
    },
    async startWorkers(concurrency, onDone) {
      let running = true;
      const loops = Array.from({ length: concurrency }, async () => {
        while (running) {
          const jobs = await boss.fetch(queue);
          if (!jobs || jobs.length === 0) {
            await sleep(5);
            continue;
          }
          for (const job of jobs) {
            await boss.complete(queue, job.id);
            onDone();
          }
        }
      });
      return async () => {
        running = false;
        await Promise.all(loops);
      };
    },
    async close() {
      if (started) await boss.stop({ graceful: false, wait: true });
    },
  };
}

/**
 * pg-boss 10 on the machine's PostgreSQL: send → fetch → complete (no long-poll: 5 ms idle
 * sleep). Every benchmark run starts from a dropped schema and every round from truncated job
 * tables, as svc starts from an empty store: completed jobs left behind made each later run
 * slower (63,600 live and 127,200 dead rows after four runs; `deleteQueue` refuses a queue
 * that still has jobs).
 */
import pg from 'pg';
import PgBoss from 'pg-boss';
import { sleep, type QueueAdapter } from './workload.js';

const SCHEMA = 'svc_bench_pgboss';

export function pgBossAdapter(connectionString: string): QueueAdapter {
  const boss = new PgBoss({ connectionString, schema: SCHEMA, supervise: false, schedule: false, migrate: true });
  const queue = 'svc-bench';
  let started = false;
  return {
    name: 'pg-boss',
    async reset() {
      if (!started) {
        const admin = new pg.Client({ connectionString });
        await admin.connect();
        await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
        await admin.end();
        boss.on('error', () => {});
        await boss.start();
        await boss.createQueue(queue);
        started = true;
      }
      await boss.clearStorage(); // TRUNCATE of the job and archive tables
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

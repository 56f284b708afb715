/**
 * graphile-worker 0.16 on PostgreSQL: addJob → LISTEN/NOTIFY dispatch → task resolves. Every
 * benchmark run starts from a dropped schema and every round from an emptied, vacuumed jobs
 * table, as svc starts from an empty store (dead rows of earlier rounds slowed later ones).
 */
import { Logger, makeWorkerUtils, run, type Runner, type WorkerUtils } from 'graphile-worker';

const quiet = new Logger(() => () => {});
import pg from 'pg';
import type { QueueAdapter } from './workload.js';

export function graphileAdapter(connectionString: string): QueueAdapter {
  let utils: WorkerUtils | null = null;
  let onDoneRef: () => void = () => {};
  const pool = new pg.Pool({ connectionString, max: 40 });
  return {
    name: 'graphile-worker',
    async reset() {
      if (!utils) {
        await pool.query('DROP SCHEMA IF EXISTS graphile_worker CASCADE');
        utils = await makeWorkerUtils({ pgPool: pool, logger: quiet });
      }
      await utils.migrate();
      await pool.query('DELETE FROM graphile_worker._private_jobs');
      await pool.query('VACUUM ANALYZE graphile_worker._private_jobs');
    },
    async enqueue(i) {
      await utils!.addJob('svc_bench', { i });
    },
    async startWorkers(concurrency, onDone) {
      onDoneRef = onDone;
      const runner: Runner = await run({
        pgPool: pool,
        concurrency,
        pollInterval: 1000,
        noHandleSignals: true,
        logger: quiet,
        taskList: {
          svc_bench: async () => {
            onDoneRef();
          },
        },
      });
      return async () => {
        await runner.stop();
      };
    },
    async close() {
      await utils?.release();
      await pool.end();
    },
  };
}

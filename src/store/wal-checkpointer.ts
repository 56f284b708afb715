/**
 * Moves WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside the
 * COMMIT that crosses the threshold (1,000 pages): it copies every frame into the database and,
 * with synchronous NORMAL or FULL, fsyncs the WAL and the database, stalling the event loop for
 * 5–10 ms on these disks (about 40 µs per transaction on average, and most of the p99 of a
 * gateway call; bench/README.md). Here a worker thread with its own connection runs PASSIVE
 * checkpoints instead: they never take the write lock, so commits continue meanwhile. SQLite
 * rewinds the WAL only when a writer begins with every frame copied, which a busy writer never
 * sees after a background checkpoint; so the worker then finishes with a RESTART checkpoint
 * while the owner holds its writes back (`finish`), which copies only the frames written
 * meanwhile and rewinds the WAL. That takes 0.3–1.3 ms here (two fsyncs), every 250 commits;
 * run by the owner it blocked the event loop for it (bench/README.md item 21), run here the
 * loop goes on parsing requests and writing responses while the store waits.
 *
 * The worker starts with the first checkpoint, so the many small stores of a test run never
 * start one. The owning connection keeps SQLite's automatic checkpoint at a higher threshold
 * as a safety net should the worker fall behind or fail.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Commits between two background checkpoints. A kernel transaction writes 3–6 WAL frames, so
 * this is about SQLite's own 1,000-page interval. (Counted rather than measured: the WAL file
 * keeps its largest size after SQLite rewinds it, so its size says nothing about its content.)
 */
export const COMMITS_PER_CHECKPOINT = 250;
/** SQLite's default automatic checkpoint (pages), restored if the worker fails. */
export const SQLITE_AUTOCHECKPOINT_PAGES = 1000;
/**
 * The owner's own automatic checkpoint (pages), reached only when the background one falls
 * behind: big transactions, or a caller that never yields to the event loop, where the worker's
 * answer (and so the rewind) waits. Kept low enough that reads never look through a huge WAL.
 */
export const FALLBACK_AUTOCHECKPOINT_PAGES = 4_000;

// The worker is plain CommonJS given as a string (`eval`), so that it runs the same from the
// TypeScript sources under vitest and from dist/.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = ' + workerData.synchronous);
parentPort.on('message', (m) => {
  if (m === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  try {
    if (m === 'restart') {
      // Never waits for another process's reader: a busy rewind is left to the next round.
      db.pragma('busy_timeout = 0');
      try {
        const [r] = db.pragma('wal_checkpoint(RESTART)');
        parentPort.postMessage({ ok: true, busy: r.busy === 1, log: r.log, checkpointed: r.checkpointed });
      } finally {
        db.pragma('busy_timeout = 5000');
      }
      return;
    }
    const [r] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ ok: true, log: r.log, checkpointed: r.checkpointed });
  } catch (err) {
    parentPort.postMessage({ ok: false, error: String(err && err.message || err) });
  }
});
`;

export interface CheckpointResult {
  ok: boolean;
  /** A RESTART that another connection's reader kept from rewinding the WAL. */
  busy?: boolean;
  log?: number;
  checkpointed?: number;
  error?: string;
}

export class WalCheckpointer {
  private worker: Worker | null = null;
  private running: Promise<CheckpointResult> | null = null;
  private commits = 0;
  private failed = false;
  private closed = false;
  /** Checkpoints the worker has finished (tests and metrics). */
  completed = 0;

  constructor(
    private readonly dbPath: string,
    private readonly synchronous: string,
    /**
     * Run by the owner after a background checkpoint: holds its own reads and writes back,
     * then calls `restart`, the worker's RESTART checkpoint, which copies the rest and rewinds
     * the WAL (SQLite can rewind it only while no transaction of the owner's is open).
     */
    private readonly finish: (restart: () => Promise<CheckpointResult>) => Promise<void>,
    /** Called once if the worker fails: the owner turns its own automatic checkpoint back on. */
    private readonly onFailure: () => void,
  ) {}

  /** Called after each commit: starts a background checkpoint every COMMITS_PER_CHECKPOINT commits. */
  afterCommit(): void {
    if (this.failed || this.closed || ++this.commits < COMMITS_PER_CHECKPOINT || this.running) return;
    this.commits = 0;
    void this.checkpoint();
  }

  /** Runs one PASSIVE checkpoint on the worker (starting it if needed); resolves when it is done. */
  checkpoint(): Promise<CheckpointResult> {
    if (this.running) return this.running;
    if (this.closed || this.failed) return Promise.resolve({ ok: false, error: 'checkpointer stopped' });
    const worker = this.start();
    this.running = this.ask(worker, 'checkpoint')
      .then(async (r) => {
        if (!r.ok || this.closed) return r;
        try {
          await this.finish(async () => {
            if (this.closed || this.failed) return { ok: false, error: 'checkpointer stopped' };
            return this.ask(worker, 'restart');
          });
          return r;
        } catch (err) {
          return { ok: false, error: (err as Error).message }; // e.g. SQLITE_BUSY: the next round catches up
        }
      })
      .finally(() => {
        this.running = null;
        this.worker?.unref();
      });
    return this.running;
  }

  /** Sends the worker one request and waits for its answer (or its failure). */
  private ask(worker: Worker, request: 'checkpoint' | 'restart'): Promise<CheckpointResult> {
    return new Promise<CheckpointResult>((resolve) => {
      const settle = (r: CheckpointResult) => {
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
        resolve(r);
      };
      const onMessage = (r: CheckpointResult) => {
        if (r.ok && request === 'checkpoint') this.completed++;
        settle(r);
      };
      // A worker that fails or exits is not restarted: the owner's automatic checkpoint takes over.
      const onError = (err: Error) => {
        this.failed = true;
        this.onFailure();
        this.worker = null;
        settle({ ok: false, error: err.message });
      };
      const onExit = (code: number) => onError(new Error(`checkpoint worker exited with code ${code}`));
      worker.on('message', onMessage).on('error', onError).on('exit', onExit);
      worker.ref(); // an awaited checkpoint keeps the process alive until it answers
      worker.postMessage(request);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, path: this.dbPath, synchronous: this.synchronous } });
    this.worker.unref(); // idle, it never keeps the process alive on its own
    return this.worker;
  }

  /** Waits for a running checkpoint, then closes the worker's connection (before the owner's). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.running;
    const w = this.worker;
    this.worker = null;
    if (!w) return;
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
    w.ref();
    w.postMessage('close');
    await exited;
  }
}

/**
 * Where the sqlite connector's statements run: a worker thread of its own, holding the
 * connector's two connections (read-write for write tools, read-only for the rest).
 *
 * better-sqlite3 is synchronous and SQLite cannot be interrupted from JavaScript, so on the
 * main thread one long statement (a recursive CTE, a lock another process holds for
 * `busy_timeout`, millions of rows) would stop svcd whole, the kernel included, past its
 * `timeout_ms` and past SIGTERM. Here it stops only its own connector: a call that is
 * abandoned (timed out, or the gateway closing) ends the thread, which aborts the statement
 * (SQLite rolls back what it had not committed) and fails the calls queued behind it as
 * upstream errors; the next call starts a fresh thread.
 *
 * The thread answers with the result's JSON text, built row by row, so a read larger than
 * `maxBytes` stops at the row that crosses it (a deterministic failure) instead of being
 * materialised, and a BLOB keeps the shape it had on the main thread (Buffer's toJSON).
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

export interface ThreadStatement {
  op: string;
  sql: string;
  writes: boolean;
}

export interface ThreadSpec {
  path: string;
  statements: ThreadStatement[];
  /** Largest result, as JSON text. */
  maxBytes: number;
}

/** What the thread reports for a failed statement. */
export interface StatementFailure {
  /**
   * `args`: the binds do not fit the statement; `too_large`: the result is over maxBytes;
   * `open`: the thread could not open the file or prepare the statements in it.
   */
  kind: 'args' | 'too_large' | 'open' | 'sqlite';
  code: string | null;
  message: string;
}

export class StatementError extends Error {
  constructor(readonly failure: StatementFailure) {
    super(failure.message);
  }
}

/** The thread ended (abandoned call, crash, close) with this call still waiting on it. */
export class ThreadEnded extends Error {}

// Plain CommonJS given as a string (`eval`), so that it runs the same from the TypeScript
// sources under vitest and from dist/ (as src/store/wal-checkpointer.ts does).
const SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const { path, statements, maxBytes } = workerData;
let rw = null;
let ro = null;
let stmts = null;
let openFailure = null;
try {
  rw = new Database(path, { fileMustExist: true });
  ro = new Database(path, { fileMustExist: true, readonly: true });
  for (const db of [rw, ro]) db.pragma('busy_timeout = 5000');
  stmts = new Map(statements.map((s) => [s.op, { stmt: (s.writes ? rw : ro).prepare(s.sql), writes: s.writes }]));
} catch (err) {
  // The file is missing, unreadable or not what it was at load: every call is told so.
  openFailure = { kind: 'open', code: (err && typeof err.code === 'string') ? err.code : null, message: 'cannot open ' + path + ': ' + String((err && err.message) || err) };
  for (const db of [ro, rw]) try { if (db) db.close(); } catch {}
}
class TooLarge extends Error {}
function rowsText(it) {
  const parts = [];
  let bytes = 0;
  for (const row of it) {
    const text = JSON.stringify(row);
    bytes += text.length + 1;
    if (bytes > maxBytes) {
      it.return();
      throw new TooLarge('the result is larger than ' + maxBytes + ' bytes');
    }
    parts.push(text);
  }
  return parts;
}
parentPort.on('message', (m) => {
  if (m === 'close') {
    if (ro) ro.close();
    if (rw) rw.close();
    parentPort.close();
    return;
  }
  if (openFailure) {
    parentPort.postMessage({ id: m.id, ok: false, failure: openFailure });
    return;
  }
  try {
    const { stmt, writes } = stmts.get(m.op);
    let text;
    if (!stmt.reader) {
      const info = stmt.run(m.binds);
      text = JSON.stringify({ changes: info.changes, last_insert_rowid: Number(info.lastInsertRowid) });
    } else if (!writes) {
      text = '{"rows":[' + rowsText(stmt.iterate(m.binds)).join(',') + ']}';
    } else {
      // A write runs to its end (it is not cut at a row); its RETURNING rows are bounded after.
      const rows = stmt.all(m.binds);
      text = rows.length === 1 ? JSON.stringify(rows[0]) : JSON.stringify({ rows });
      if (text.length > maxBytes) throw new TooLarge('the result is larger than ' + maxBytes + ' bytes');
    }
    parentPort.postMessage({ id: m.id, ok: true, text });
  } catch (err) {
    const kind = err instanceof TooLarge ? 'too_large' : err instanceof RangeError || err instanceof TypeError ? 'args' : 'sqlite';
    parentPort.postMessage({ id: m.id, ok: false, failure: { kind, code: (err && typeof err.code === 'string') ? err.code : null, message: String((err && err.message) || err) } });
  }
});
`;

interface Waiting {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

type Reply = { id: number; ok: true; text: string } | { id: number; ok: false; failure: StatementFailure };

/** One thread's life: the calls waiting on it belong to it, not to the one that replaces it. */
interface Life {
  worker: Worker;
  waiting: Map<number, Waiting>;
  /** Replaced by restart(): ends once its last call is answered. */
  retiring?: boolean;
}

export class StatementThread {
  private life: Life | null = null;
  /** Threads restart() replaced that are still answering their last calls. */
  private readonly retiring = new Set<Life>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly spec: ThreadSpec) {}

  /** Starts the thread now rather than at the first call. */
  warm(): void {
    this.thread();
  }

  /** Runs statement `op` with `binds`; `signal` abandoning the call ends the thread. */
  run(op: string, binds: Record<string, unknown>, signal: AbortSignal): Promise<unknown> {
    if (this.closed) return Promise.reject(new ThreadEnded('the connector is closed'));
    if (signal.aborted) return Promise.reject(new ThreadEnded('the call was abandoned before it ran'));
    const life = this.thread();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => this.end(life, 'a call was abandoned (timed out) while its statement ran; the statement was stopped');
      signal.addEventListener('abort', onAbort, { once: true });
      life.waiting.set(id, {
        resolve: (v) => {
          signal.removeEventListener('abort', onAbort);
          resolve(v);
        },
        reject: (e) => {
          signal.removeEventListener('abort', onAbort);
          reject(e);
        },
      });
      life.worker.ref(); // a statement in flight keeps the process alive, an idle thread does not
      life.worker.postMessage({ id, op, binds });
    });
  }

  /** Ends the current thread after its calls (the next call opens the file afresh). */
  restart(): void {
    const life = this.life;
    if (!life) return;
    this.life = null; // new calls go to a new thread; this one finishes what it has
    if (life.waiting.size === 0) void life.worker.terminate();
    else {
      life.retiring = true;
      this.retiring.add(life);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const old of this.retiring) this.end(old, 'the connector is closing');
    const life = this.life;
    if (!life) return;
    const exited = new Promise<void>((resolve) => life.worker.once('exit', () => resolve()));
    if (life.waiting.size > 0) this.end(life, 'the connector is closing');
    else {
      life.worker.ref();
      life.worker.postMessage('close'); // closes the connections in order (read-only first: the WAL is checkpointed)
    }
    await exited;
  }

  private thread(): Life {
    if (this.life) return this.life;
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(SOURCE, { eval: true, workerData: { driver, ...this.spec } });
    worker.unref();
    const life: Life = { worker, waiting: new Map() };
    worker.on('message', (m: Reply) => {
      const waiter = life.waiting.get(m.id);
      if (!waiter) return;
      life.waiting.delete(m.id);
      if (life.waiting.size === 0) {
        worker.unref();
        if (life.retiring) void worker.terminate();
      }
      if (m.ok) {
        try {
          waiter.resolve(JSON.parse(m.text));
        } catch (err) {
          waiter.reject(err as Error);
        }
      } else waiter.reject(new StatementError(m.failure));
    });
    worker.on('error', (err: unknown) => this.failAll(life, `the statement thread failed: ${(err as Error)?.message ?? String(err)}`));
    worker.on('exit', () => this.failAll(life, 'the statement thread ended'));
    this.life = life;
    return life;
  }

  /** Ends the thread (stopping its statement); every call waiting on it fails. */
  private end(life: Life, why: string): void {
    this.failAll(life, why);
    void life.worker.terminate();
  }

  private failAll(life: Life, why: string): void {
    if (this.life === life) this.life = null;
    this.retiring.delete(life);
    const waiting = [...life.waiting.values()];
    life.waiting.clear();
    for (const x of waiting) x.reject(new ThreadEnded(why));
  }
}

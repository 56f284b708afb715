/**
 * A child process that runs one sqlite connector's statements, so that a slow statement
 * (a recursive CTE, a huge aggregate) cannot hold up svcd: better-sqlite3 is synchronous and
 * SQLite cannot be interrupted from JavaScript, and terminating a worker thread does not stop
 * a native statement either (docs/design.md, "Upstreams are hostile peers too"). A process
 * can be killed. When a call is abandoned (its `timeout_ms`, the gateway stopping) while its
 * statement runs, the child is killed with SIGKILL: SQLite rolls back whatever the statement
 * had not committed, and the next call starts a new child. The child says `started` before a
 * write runs; a killed (or dead) child's write is decided once its channel has been read to
 * the end: one that had started is reported as an unknown outcome — it may have committed just
 * before the kill — so its idempotency key is never released for a second execution; one that
 * had not provably never ran.
 *
 * One statement runs at a time (SQLite serialises writers anyway, and it keeps the kill to the
 * one statement that overran): calls queue here, and a queued call that is abandoned is simply
 * dropped. Messages are JSON (node's IPC), the same shape a result has on the wire.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { ABANDONED_WRITE_GRACE_MS, abortMessage, ArgsInvalid, DeterministicFailure, NotAttempted, UpstreamError } from './types.js';

/** How a statement's answer is shaped (decided at load from the prepared statement). */
export type StatementMode = 'run' | 'returning' | 'select';

export interface HostedStatement {
  op: string;
  sql: string;
  writes: boolean;
  mode: StatementMode;
  /**
   * Run in a transaction of its own with the schema check (default). False for a PRAGMA,
   * which SQLite may refuse inside one (journal_mode) and whose scope no view or trigger
   * changes: it runs as it stands.
   */
  transaction?: boolean;
}

export interface StatementHostOptions {
  /** The connector's name, for messages. */
  name: string;
  path: string;
  statements: HostedStatement[];
  busyTimeoutMs: number;
  maxResultBytes: number;
  /** SQLite error codes (a regex source) about the file itself: the child reopens it. */
  fileCodes: string;
  /** The node binary for the child; tests point it elsewhere to make the spawn fail. */
  execPath?: string;
}

/** What the child says when a statement fails: classified by the connector. */
export interface StatementFailure {
  kind: 'sqlite' | 'too_large' | 'unavailable' | 'bad_binding' | 'schema_changed';
  message: string;
  code: string | null;
  /** With `schema_changed`: the file's schema_version now. */
  schemaVersion?: number;
}

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; failure: StatementFailure };

interface Pending {
  id: number;
  op: string;
  binds: Record<string, unknown>;
  /** The schema the call's scopes were checked for: the child refuses it under another (null: unchecked). */
  schemaVersion: number | null;
  writes: boolean;
  /**
   * Where the call is: `queued` here, `sending` (handed to the channel), `sent` (written to
   * it), `started` (the process said it is running the write), `refused` (provably never
   * reached a process), `settled`.
   */
  delivery: 'queued' | 'sending' | 'sent' | 'started' | 'refused' | 'settled';
  /** Put back once after it provably did not run (its process died before taking it). */
  retried: boolean;
  signal: AbortSignal;
  onAbort: () => void;
  /** Called when a write that had started fails: it may have taken effect. */
  outcomeUnknown: () => void;
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

/** How long close() waits for the child to close its connections before killing it. */
const CLOSE_GRACE_MS = 2000;
/**
 * How long a killed child's call waits for the child's channel to end before it is decided
 * on the safe side (a write handed over counts as started): within the gateway's wait.
 */
const DECIDE_WITHIN_MS = ABANDONED_WRITE_GRACE_MS - 1000;
/** How often the child's watchdog checks that svcd is still its parent. */
const PARENT_CHECK_MS = 500;
/** The end of the child's stderr kept for the message when it dies (a driver that fails to load). */
const STDERR_TAIL_BYTES = 2048;

// Plain CommonJS given to `node -e`, so it runs the same from the TypeScript sources under
// vitest and from dist/. argv[1] is better-sqlite3's resolved path.
const CHILD_SOURCE = `
const Database = require(process.argv[1]);
// svcd killed outright (SIGKILL, OOM) cannot kill this process, and a statement running here
// never yields to the IPC 'disconnect' event below; a watchdog thread ends the process when its
// parent is gone, statement or not.
const { Worker } = require('node:worker_threads');
new Worker('const p = process.ppid; setInterval(() => { if (process.ppid !== p) process.kill(process.pid, "SIGKILL"); }, ' + ${PARENT_CHECK_MS} + ');', { eval: true }).unref();
const { statSync } = require('node:fs');
let cfg = null, fileCodes = null, rw = null, ro = null, stmts = null, opened = null, versionOf = null;
function closeAll() {
  // The read-only connection first: the last to close (it can write) checkpoints the WAL.
  try { if (ro) ro.close(); if (rw) rw.close(); } catch (e) {}
  rw = ro = stmts = opened = versionOf = null;
}
function statOf(path) {
  try { return statSync(path, { throwIfNoEntry: false }); } catch (e) { return undefined; } // ENOTDIR, EACCES, ELOOP
}
// The file the connections have open is still the one at the path? A file moved away, deleted
// or replaced (a restore from a backup) keeps answering reads from the old inode, and only a
// write would notice (SQLITE_READONLY_DBMOVED): asked before every call, so the call reopens.
function sameFile() {
  const now = statOf(cfg.path);
  return now !== undefined && opened !== null && now.ino === opened.ino && now.dev === opened.dev;
}
// The connections' file was replaced, moved or deleted, but its write-ahead log at the path
// still holds the old file's frames: a connection opened on the new file would replay them over
// it, and its close would write them in, destroying a restored backup. The old connection
// empties the log first (TRUNCATE). While another connection holds the log, the old ones stay
// open and false is returned: the call is refused, and the next one tries again.
function leaveOldFile() {
  try {
    const r = rw.pragma('wal_checkpoint(TRUNCATE)');
    if (r && r[0] && r[0].busy) return false;
  } catch (e) {} // not in WAL mode: nothing to empty
  closeAll();
  return true;
}
const HELD_LOG = 'the database file was replaced, moved or deleted while another connection holds its write-ahead log, whose old frames would be written into the new file; it is opened once that connection lets go';
function open() {
  opened = statOf(cfg.path) || null;
  rw = new Database(cfg.path, { fileMustExist: true });
  rw.pragma('busy_timeout = ' + cfg.busyTimeoutMs);
  // A read through the read-write connection first: a write killed mid-transaction in
  // rollback-journal mode leaves a hot journal, which only a connection that may write rolls
  // back (a read-only one fails with SQLITE_READONLY_ROLLBACK, call after call).
  rw.prepare('PRAGMA schema_version').get();
  ro = new Database(cfg.path, { fileMustExist: true, readonly: true });
  ro.pragma('busy_timeout = ' + cfg.busyTimeoutMs);
  // Integers as BigInt, so one past 2^53 is not rounded on its way out (jsonValue below).
  for (const db of [rw, ro]) db.defaultSafeIntegers(true);
  stmts = new Map(cfg.statements.map((s) => [s.op, { s, stmt: (s.writes ? rw : ro).prepare(s.sql) }]));
  // Prepared once: db.pragma() prepares its statement on every call.
  versionOf = { rw: rw.prepare('PRAGMA schema_version').pluck(), ro: ro.prepare('PRAGMA schema_version').pluck() };
}
// A column value as JSON can carry it: an integer past 2^53 as its decimal string (a number
// would round it: another row's id), a BLOB as base64 (JSON has no bytes).
function jsonValue(v) {
  if (typeof v === 'bigint') return v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : v.toString();
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  return v;
}
function jsonRow(row) {
  for (const k in row) {
    const v = row[k];
    if (typeof v === 'bigint' || typeof v === 'object') row[k] = jsonValue(v);
  }
  return row;
}
// A JSON integer binds as an SQLite INTEGER, as it would from SQL text: better-sqlite3 binds
// every JS number as a REAL, so 2 stored into a TEXT column read back '2.0', and a
// compensation matching an id from a step's output against text found nothing.
function sqlBinds(binds) {
  const out = {};
  for (const k in binds) {
    const v = binds[k];
    out[k] = typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : v;
  }
  return out;
}
class TooLarge extends Error {}
function selectRows(stmt, binds) {
  const rows = [];
  let bytes = 0;
  const it = stmt.iterate(binds);
  for (const row of it) {
    jsonRow(row);
    bytes += Buffer.byteLength(JSON.stringify(row)) + 1;
    if (bytes > cfg.maxResultBytes) { it.return(); throw new TooLarge('the result is larger than ' + cfg.maxResultBytes + ' bytes'); }
    rows.push(row);
  }
  return rows;
}
// A write's changes are all made by its first step, its RETURNING rows then read from SQLite's
// buffer: the write runs to its end whatever their size (stopping early would leave that to
// how SQLite resets a statement), and only what is kept and sent back is bounded.
function returningRows(stmt, binds) {
  const rows = [];
  let bytes = 0;
  for (const row of stmt.iterate(binds)) {
    if (bytes > cfg.maxResultBytes) continue;
    jsonRow(row);
    bytes += Buffer.byteLength(JSON.stringify(row)) + 1;
    if (bytes > cfg.maxResultBytes) rows.length = 0;
    else rows.push(row);
  }
  return bytes > cfg.maxResultBytes ? null : rows; // null: too large, said once the write is committed
}
// The tables a statement touches were found for one schema (m.version, sent with each call);
// a view or trigger redefined since (a migration, a restored file) can lead it to others. So
// the version is read in the statement's own transaction, and a call that finds another is
// refused before it runs. A write's transaction takes the write lock first (IMMEDIATE), so no
// migration commits between the check and the write.
function checkedRun(m, s, stmt) {
  if (m.version !== undefined && m.version !== null) {
    const version = Number((s.writes ? versionOf.rw : versionOf.ro).get());
    if (version !== m.version) return { ok: false, failure: { kind: 'schema_changed', message: 'the schema changed since its tables were found (schema_version ' + m.version + ', now ' + version + ')', code: null, schemaVersion: version } };
  }
  if (s.mode === 'run') {
    const info = stmt.run(m.binds);
    return { ok: true, value: { changes: info.changes, last_insert_rowid: jsonValue(info.lastInsertRowid) } };
  }
  if (s.mode === 'returning') {
    const rows = returningRows(stmt, m.binds);
    return rows === null ? { tooLarge: true } : { ok: true, value: rows.length === 1 ? rows[0] : { rows } };
  }
  return { ok: true, value: { rows: selectRows(stmt, m.binds) } };
}
function execute(m) {
  if (stmts && !sameFile() && !leaveOldFile()) return { ok: false, failure: { kind: 'unavailable', message: HELD_LOG, code: 'SQLITE_BUSY' } };
  if (!stmts) {
    try { open(); } catch (err) {
      closeAll();
      return { ok: false, failure: { kind: 'unavailable', message: String(err && err.message || err), code: err && typeof err.code === 'string' ? err.code : null } };
    }
  }
  const { s, stmt } = stmts.get(m.op);
  // Before a write runs, so svcd can tell a write that never started from one that may have
  // committed when this process dies.
  if (s.writes) process.send({ type: 'started', id: m.id });
  m = { ...m, binds: sqlBinds(m.binds) };
  try {
    let r;
    if (s.transaction === false) r = checkedRun({ ...m, version: null }, s, stmt);
    else {
      const txn = (s.writes ? rw : ro).transaction(checkedRun);
      r = s.writes ? txn.immediate(m, s, stmt) : txn(m, s, stmt);
    }
    if (r.tooLarge) throw new TooLarge('the write was made, but its RETURNING rows are larger than ' + cfg.maxResultBytes + ' bytes');
    return r;
  } catch (err) {
    const code = err && typeof err.code === 'string' ? err.code : null;
    if (code !== null && fileCodes.test(code)) { if (sameFile()) closeAll(); else leaveOldFile(); } // reopened by the next call
    const kind = err instanceof TooLarge ? 'too_large' : err instanceof RangeError || err instanceof TypeError ? 'bad_binding' : 'sqlite';
    return { ok: false, failure: { kind, message: String(err && err.message || err), code } };
  }
}
process.on('message', (m) => {
  if (m.type === 'init') {
    cfg = m;
    fileCodes = new RegExp(m.fileCodes);
    // Opened now, so a boot that cannot load the driver or open the file shows at start.
    let error = null;
    try { open(); } catch (err) { closeAll(); error = String(err && err.message || err); }
    process.send({ type: 'ready', error });
    return;
  }
  if (m.type === 'close') { closeAll(); process.disconnect(); return; }
  if (m.type === 'call') process.send(Object.assign({ id: m.id }, execute(m)));
});
process.on('disconnect', () => { closeAll(); process.exit(0); });
`;

const driverPath = createRequire(import.meta.url).resolve('better-sqlite3');

/**
 * What of svcd's environment the child gets: where SQLite may spill temporary files, the time
 * zone its `localtime` modifier reads, and what node itself may need to load. Nothing else —
 * svcd's secrets least of all.
 */
const CHILD_ENV = ['TMPDIR', 'SQLITE_TMPDIR', 'TZ', 'LD_LIBRARY_PATH'];
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of CHILD_ENV) if (process.env[k] !== undefined) env[k] = process.env[k];
  return env;
}

export class StatementHost {
  private child: ChildProcess | null = null;
  private stderrTail = '';
  private readonly queue: Pending[] = [];
  private current: Pending | null = null;
  /**
   * Calls in flight on a child that was killed (their timeout, close): each is decided when
   * that child's channel has been read to its end, so a `started` on the way is not missed.
   */
  private readonly dying = new Map<ChildProcess, { p: Pending; message: string; timer: NodeJS.Timeout }>();
  private nextId = 1;
  private closed = false;
  private readonly modes: Map<string, HostedStatement>;
  /** Settled by the first child's `ready` (or its end): what start() waits for. */
  private firstReady: Promise<string | null> | null = null;

  constructor(private readonly opts: StatementHostOptions) {
    this.modes = new Map(opts.statements.map((s) => [s.op, s]));
  }

  /**
   * Starts the child and waits until it has loaded the driver and opened the file, so a child
   * that cannot boot, or cannot open the file the connector has just checked, fails the
   * connector's start instead of every call. Resolves with what went wrong, or null.
   */
  async start(): Promise<string | null> {
    this.ensureChild();
    const problem = await this.firstReady!;
    this.holdOpen();
    return problem;
  }

  /** Runs one statement; rejects with StatementFailureError (the child's refusal) or UpstreamError. */
  run(op: string, binds: Record<string, unknown>, signal: AbortSignal, outcomeUnknown: () => void, schemaVersion: number | null = null): Promise<unknown> {
    const s = this.modes.get(op);
    if (!s) return Promise.reject(new DeterministicFailure(`no statement ${op}`));
    if (this.closed) return Promise.reject(new UpstreamError(`connector ${this.opts.name} is closed`));
    if (signal.aborted) return Promise.reject(new UpstreamError(abortMessage(signal)));
    return new Promise((resolve, reject) => {
      const p: Pending = { id: this.nextId++, op, binds, schemaVersion, writes: s.writes, delivery: 'queued', retried: false, signal, outcomeUnknown, resolve, reject, onAbort: () => this.abandon(p) };
      signal.addEventListener('abort', p.onAbort, { once: true });
      this.queue.push(p);
      this.pump();
    });
  }

  /** The child's pid (tests). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.queue.splice(0)) this.settle(p, () => p.reject(new UpstreamError(`connector ${this.opts.name} is closing`)));
    const child = this.child;
    const p = this.current;
    this.child = null;
    this.current = null;
    if (!child || child.pid === undefined) {
      if (p) this.fail(p, `connector ${this.opts.name} is closing`); // never reached a process
      return;
    }
    const closed = this.closeOf(child);
    if (p) this.retire(child, p, `connector ${this.opts.name} is closing`); // a running statement would hold a graceful close up
    else if (child.connected) child.send({ type: 'close' }, () => undefined);
    const timer = setTimeout(() => child.kill('SIGKILL'), CLOSE_GRACE_MS);
    await closed;
    clearTimeout(timer);
  }

  /** Resolves on the child's 'close', or after a bound should it never come. */
  private closeOf(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const bound = setTimeout(resolve, CLOSE_GRACE_MS + DECIDE_WITHIN_MS);
      child.once('close', () => {
        clearTimeout(bound);
        resolve();
      });
    });
  }

  /** Keeps this process alive for the child while it has work, not when idle. */
  private holdOpen(): void {
    const child = this.child;
    if (!child || child.pid === undefined) return;
    const busy = this.current !== null || this.queue.length > 0;
    const channel = (child as unknown as { channel?: { ref(): void; unref(): void } }).channel;
    if (busy) {
      child.ref();
      channel?.ref();
    } else {
      child.unref();
      channel?.unref();
    }
  }

  /** The running child, started when there is none; null when it cannot be started now. */
  private ensureChild(): ChildProcess | null {
    if (this.child) return this.child;
    this.stderrTail = '';
    let child: ChildProcess;
    try {
      child = spawn(this.opts.execPath ?? process.execPath, ['-e', CHILD_SOURCE, driverPath], {
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
        serialization: 'json',
        env: childEnv(),
      });
    } catch (err) {
      this.noChild((err as Error).message);
      return null;
    }
    // Listeners before anything else: a spawn that failed (ENOENT, EMFILE, EAGAIN) reports
    // through 'error' on the next tick, with no pid and, out of descriptors, no stdio.
    let ready!: (error: string | null) => void;
    const readyOnce = new Promise<string | null>((resolve) => (ready = resolve));
    this.firstReady ??= readyOnce;
    child.on('message', (m: Reply | { type: 'ready'; error: string | null } | { type: 'started'; id: number }) => {
      if (!('type' in m)) this.onReply(child, m);
      else if (m.type === 'ready') ready(m.error);
      else this.onStarted(child, m.id);
    });
    // 'close', not 'exit': it comes once the channel is read to its end, so a `started` the
    // process sent before it died has been seen.
    child.on('close', (code, sig) => {
      const how = sig ? `signal ${sig}` : `exit code ${code}`;
      ready(this.ended(how));
      if (this.dying.has(child)) this.decide(child, true);
      else this.onExit(child, how);
    });
    child.on('error', (err) => {
      ready(this.ended(err.message));
      if (child.pid === undefined) this.onExit(child, err.message, true);
    });
    this.child = child;
    if (child.pid === undefined || !child.stderr) return child; // not started: 'error' follows
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      if (this.child === child) this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
    });
    // Its stderr never keeps this process alive; the child and its channel do only while
    // they have work (start, a call), so an idle one does not hold a CLI or an embedder open.
    (child.stderr as unknown as { unref?(): void }).unref?.();
    const { name: _name, execPath: _execPath, ...init } = this.opts;
    child.send({ type: 'init', ...init }, () => undefined); // a failure shows as the child's close
    return child;
  }

  /** A child's end, as the message start() reports. */
  private ended(how: string): string {
    return `the statement process ended before it was ready (${how})${this.stderrNote()}`;
  }

  private endedMessage(how: string): string {
    return `connector ${this.opts.name}: the statement process ended (${how})${this.stderrNote()}`;
  }

  private stderrNote(): string {
    const tail = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
    return tail ? `: ${tail}` : '';
  }

  /** No process could be started: the call waiting for one did not run. */
  private noChild(reason: string): void {
    this.firstReady ??= Promise.resolve(`cannot start the statement process: ${reason}`);
    const p = this.current;
    if (!p) return;
    this.current = null;
    this.notRun(p, `connector ${this.opts.name}: cannot start the statement process: ${reason}`);
  }

  private pump(): void {
    if (this.current || this.closed) return;
    const p = this.queue.shift();
    if (!p) {
      this.holdOpen();
      return;
    }
    this.current = p;
    const child = this.ensureChild();
    if (!child) return this.pump(); // noChild answered p; the next call may find a process
    if (child.pid === undefined || !child.connected) return; // 'error' or 'close' answers p
    p.delivery = 'sending';
    this.holdOpen();
    child.send({ type: 'call', id: p.id, op: p.op, binds: p.binds, version: p.schemaVersion }, (err) => {
      if (p.delivery !== 'sending') return;
      if (!err) {
        p.delivery = 'sent';
        return;
      }
      // Never written: the statement did not run, whatever became of the process.
      if (this.child === child) {
        this.child = null;
        child.kill('SIGKILL');
      }
      if (this.current === p) {
        this.current = null;
        this.notRun(p, `connector ${this.opts.name}: the statement process did not take the call (${err.message})`);
      }
      this.pump();
    });
  }

  private onStarted(child: ChildProcess, id: number): void {
    const p = child === this.child ? this.current : this.dying.get(child)?.p;
    if (p && p.id === id && p.delivery !== 'settled') p.delivery = 'started';
  }

  private onReply(child: ChildProcess, m: Reply): void {
    const dying = this.dying.get(child);
    if (dying) {
      // Answered before the kill landed: the call's outcome, known after all (a write's
      // late answer is stored under its key like any other, src/gateway/call.ts).
      if (m.id !== dying.p.id) return;
      this.dying.delete(child);
      clearTimeout(dying.timer);
      this.answer(dying.p, m);
      return;
    }
    if (child !== this.child || !this.current || m.id !== this.current.id) return;
    const p = this.current;
    this.current = null;
    this.answer(p, m);
    this.pump();
  }

  private answer(p: Pending, m: Reply): void {
    if (m.ok) this.settle(p, () => p.resolve(m.value));
    else this.settle(p, () => p.reject(new StatementFailureError(m.failure)));
  }

  /** The child ended by itself (or never started: `notStarted`). */
  private onExit(child: ChildProcess, how: string, notStarted = false): void {
    if (child !== this.child) return; // a child already replaced
    this.child = null;
    const p = this.current;
    if (p) {
      this.current = null;
      // Its channel has been read to the end: a write it had not said `started` never ran.
      if (!notStarted && p.delivery === 'started') this.fail(p, this.endedMessage(how));
      else this.notRun(p, this.endedMessage(how));
    }
    this.pump();
  }

  /** The call was given up (its timeout, the gateway stopping). */
  private abandon(p: Pending): void {
    const queued = this.queue.indexOf(p);
    if (queued !== -1) {
      this.queue.splice(queued, 1);
      this.settle(p, () => p.reject(new UpstreamError(abortMessage(p.signal))));
      return;
    }
    if (this.current !== p) return;
    // Its statement may be running: only killing the process stops it.
    const child = this.child;
    this.child = null;
    this.current = null;
    if (child && child.pid !== undefined) this.retire(child, p, abortMessage(p.signal));
    else this.fail(p, abortMessage(p.signal)); // no process took it: nothing ran
    this.pump();
  }

  /** Kills the child running `p`; `p` is decided when the child's channel ends (decide). */
  private retire(child: ChildProcess, p: Pending, message: string): void {
    // Should 'close' never come, the safe side: a write handed over counts as started.
    const timer = setTimeout(() => this.decide(child, false), DECIDE_WITHIN_MS);
    timer.unref();
    this.dying.set(child, { p, message, timer });
    child.kill('SIGKILL');
  }

  /** `exact`: the channel was read to its end, so a `started` not seen was never sent. */
  private decide(child: ChildProcess, exact: boolean): void {
    const d = this.dying.get(child);
    if (!d) return;
    this.dying.delete(child);
    clearTimeout(d.timer);
    const { p, message } = d;
    if (!exact && (p.delivery === 'sending' || p.delivery === 'sent')) p.delivery = 'started';
    this.fail(p, message);
  }

  /**
   * A call that provably never ran (no process took it, or its process ended before it began):
   * run once more on a new process, as its caller would have it; failing that, an error that
   * is never an unknown outcome.
   */
  private notRun(p: Pending, message: string): void {
    if (p.delivery === 'settled') return;
    p.delivery = 'refused';
    if (!p.retried && !this.closed && !p.signal.aborted) {
      p.retried = true;
      p.delivery = 'queued';
      this.queue.unshift(p);
      return; // the caller pumps
    }
    this.fail(p, message);
  }

  /** Fails a call; a write that started may have committed, so its outcome is unknown. */
  private fail(p: Pending, message: string): void {
    if (p.writes && p.delivery === 'started') p.outcomeUnknown();
    this.settle(p, () => p.reject(new UpstreamError(message)));
  }

  private settle(p: Pending, done: () => void): void {
    if (p.delivery === 'settled') return;
    p.delivery = 'settled';
    p.signal.removeEventListener('abort', p.onAbort);
    done();
  }
}

/** A statement the child ran and SQLite (or the binding) refused. */
export class StatementFailureError extends Error {
  constructor(readonly failure: StatementFailure) {
    super(failure.message);
    this.name = 'StatementFailureError';
  }
}

/** Maps a refusal of the child to the gateway's failure kinds (decisions §9). */
export function classifyFailure(f: StatementFailure, deterministicCodes: RegExp, connector: string, path: string, maxBytes: number): Error {
  switch (f.kind) {
    case 'too_large':
      return new DeterministicFailure(f.message, { max_bytes: maxBytes });
    case 'bad_binding':
      return new ArgsInvalid(f.message || 'bad parameters');
    case 'unavailable':
      return new UpstreamError(`connector ${connector}: cannot open ${path}: ${f.message}`, { sqlite_code: f.code });
    case 'schema_changed':
      return new NotAttempted(`connector ${connector}: ${f.message}; the call was not run`);
    case 'sqlite':
      if (f.code !== null && deterministicCodes.test(f.code)) return new DeterministicFailure(f.message || f.code, { sqlite_code: f.code });
      return new UpstreamError(f.message || 'sqlite error', { sqlite_code: f.code });
  }
}

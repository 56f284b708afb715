/**
 * A child process that runs one sqlite connector's statements, so that a slow statement
 * (a recursive CTE, a huge aggregate) cannot hold up svcd: better-sqlite3 is synchronous and
 * SQLite cannot be interrupted from JavaScript, and terminating a worker thread does not stop
 * a native statement either (docs/design.md, "Upstreams are hostile peers too"). A process
 * can be killed. When a call is abandoned (its `timeout_ms`, the gateway stopping) while its
 * statement runs, the child is killed with SIGKILL: SQLite rolls back whatever the statement
 * had not committed, the next call starts a new child, and a write that had been sent is
 * reported as an unknown outcome — it may have committed just before the kill — so its
 * idempotency key is never released for a second execution.
 *
 * One statement runs at a time (SQLite serialises writers anyway, and it keeps the kill to the
 * one statement that overran): calls queue here, and a queued call that is abandoned is simply
 * dropped. Messages are JSON (node's IPC), the same shape a result has on the wire.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { abortMessage, ArgsInvalid, DeterministicFailure, UpstreamError } from './types.js';

/** How a statement's answer is shaped (decided at load from the prepared statement). */
export type StatementMode = 'run' | 'returning' | 'select';

export interface HostedStatement {
  op: string;
  sql: string;
  writes: boolean;
  mode: StatementMode;
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
}

/** What the child says when a statement fails: classified by the connector. */
export interface StatementFailure {
  kind: 'sqlite' | 'too_large' | 'unavailable' | 'bad_binding';
  message: string;
  code: string | null;
}

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; failure: StatementFailure };

interface Pending {
  id: number;
  op: string;
  binds: Record<string, unknown>;
  writes: boolean;
  signal: AbortSignal;
  onAbort: () => void;
  /** Called when a write is abandoned after it was sent: it may have taken effect. */
  outcomeUnknown: () => void;
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

/** How long close() waits for the child to close its connections before killing it. */
const CLOSE_GRACE_MS = 2000;
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
let cfg = null, rw = null, ro = null, stmts = null;
function closeAll() {
  // The read-only connection first: the last to close (it can write) checkpoints the WAL.
  try { if (ro) ro.close(); if (rw) rw.close(); } catch (e) {}
  rw = ro = stmts = null;
}
function open() {
  rw = new Database(cfg.path, { fileMustExist: true });
  ro = new Database(cfg.path, { fileMustExist: true, readonly: true });
  for (const db of [rw, ro]) db.pragma('busy_timeout = ' + cfg.busyTimeoutMs);
  stmts = new Map(cfg.statements.map((s) => [s.op, { s, stmt: (s.writes ? rw : ro).prepare(s.sql) }]));
}
class TooLarge extends Error {}
function selectRows(stmt, binds) {
  const rows = [];
  let bytes = 0;
  const it = stmt.iterate(binds);
  for (const row of it) {
    bytes += Buffer.byteLength(JSON.stringify(row)) + 1;
    if (bytes > cfg.maxResultBytes) { it.return(); throw new TooLarge('the result is larger than ' + cfg.maxResultBytes + ' bytes'); }
    rows.push(row);
  }
  return rows;
}
function execute(m) {
  if (!stmts) {
    try { open(); } catch (err) {
      closeAll();
      return { ok: false, failure: { kind: 'unavailable', message: String(err && err.message || err), code: err && typeof err.code === 'string' ? err.code : null } };
    }
  }
  const { s, stmt } = stmts.get(m.op);
  try {
    if (s.mode === 'run') {
      const info = stmt.run(m.binds);
      return { ok: true, value: { changes: info.changes, last_insert_rowid: Number(info.lastInsertRowid) } };
    }
    if (s.mode === 'returning') {
      const rows = stmt.all(m.binds);
      return { ok: true, value: rows.length === 1 ? rows[0] : { rows } };
    }
    return { ok: true, value: { rows: selectRows(stmt, m.binds) } };
  } catch (err) {
    const code = err && typeof err.code === 'string' ? err.code : null;
    if (code !== null && new RegExp(cfg.fileCodes).test(code)) closeAll(); // reopened by the next call
    const kind = err instanceof TooLarge ? 'too_large' : err instanceof RangeError || err instanceof TypeError ? 'bad_binding' : 'sqlite';
    return { ok: false, failure: { kind, message: String(err && err.message || err), code } };
  }
}
process.on('message', (m) => {
  if (m.type === 'init') { cfg = m; return; }
  if (m.type === 'close') { closeAll(); process.disconnect(); return; }
  if (m.type === 'call') process.send(Object.assign({ id: m.id }, execute(m)));
});
process.on('disconnect', () => { closeAll(); process.exit(0); });
`;

const driverPath = createRequire(import.meta.url).resolve('better-sqlite3');

/** Where SQLite may spill temporary files; nothing else of svcd's environment. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const k of ['TMPDIR', 'SQLITE_TMPDIR']) if (process.env[k] !== undefined) env[k] = process.env[k];
  return env;
}

export class StatementHost {
  private child: ChildProcess | null = null;
  private stderrTail = '';
  private readonly queue: Pending[] = [];
  private current: Pending | null = null;
  private nextId = 1;
  private closed = false;
  private readonly modes: Map<string, HostedStatement>;

  constructor(private readonly opts: StatementHostOptions) {
    this.modes = new Map(opts.statements.map((s) => [s.op, s]));
  }

  /** Starts the child ahead of the first call, so that call does not wait for node to boot. */
  start(): void {
    this.ensureChild();
  }

  /** Runs one statement; rejects with the child's failure as StatementFailureError, or UpstreamError. */
  run(op: string, binds: Record<string, unknown>, signal: AbortSignal, outcomeUnknown: () => void): Promise<unknown> {
    const s = this.modes.get(op);
    if (!s) return Promise.reject(new DeterministicFailure(`no statement ${op}`));
    if (this.closed) return Promise.reject(new UpstreamError(`connector ${this.opts.name} is closed`));
    if (signal.aborted) return Promise.reject(new UpstreamError(abortMessage(signal)));
    return new Promise((resolve, reject) => {
      const p: Pending = { id: this.nextId++, op, binds, writes: s.writes, signal, outcomeUnknown, resolve, reject, onAbort: () => this.abandon(p) };
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
    this.child = null;
    // A statement still running would hold a graceful close up for as long as it runs.
    const busy = this.current !== null;
    if (this.current) this.fail(this.current, `connector ${this.opts.name} is closing`);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (child.connected && !busy) child.send({ type: 'close' }, () => undefined);
    else child.kill('SIGKILL');
    const timer = setTimeout(() => child.kill('SIGKILL'), CLOSE_GRACE_MS);
    await exited;
    clearTimeout(timer);
  }

  private ensureChild(): ChildProcess {
    if (this.child) return this.child;
    const child = spawn(process.execPath, ['-e', CHILD_SOURCE, driverPath], {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      serialization: 'json',
      env: childEnv(), // none of svcd's environment, its secrets least of all
    });
    this.child = child;
    this.stderrTail = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      if (this.child === child) this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
    });
    child.on('message', (m: Reply) => this.onReply(child, m));
    child.on('exit', (code, sig) => this.onExit(child, code, sig));
    child.on('error', (err) => this.onExit(child, null, null, err));
    // An idle child must not keep a process (a CLI command) alive; a call in flight has its
    // own request keeping svcd up.
    child.unref();
    (child as unknown as { channel?: { unref(): void } }).channel?.unref();
    const { name: _name, ...init } = this.opts;
    child.send({ type: 'init', ...init });
    return child;
  }

  private pump(): void {
    if (this.current || this.closed) return;
    const p = this.queue.shift();
    if (!p) return;
    this.current = p;
    const child = this.ensureChild();
    child.send({ type: 'call', id: p.id, op: p.op, binds: p.binds }, (err) => {
      // The channel closed under the message: the exit handler answers the call.
      if (err && this.child === child) child.kill('SIGKILL');
    });
  }

  private onReply(child: ChildProcess, m: Reply): void {
    if (child !== this.child || !this.current || m.id !== this.current.id) return;
    const p = this.current;
    this.current = null;
    if (m.ok) this.settle(p, () => p.resolve(m.value));
    else this.settle(p, () => p.reject(new StatementFailureError(m.failure)));
    this.pump();
  }

  private onExit(child: ChildProcess, code: number | null, sig: NodeJS.Signals | null, err?: Error): void {
    if (child !== this.child) return; // a child already replaced (killed on an abandoned call)
    this.child = null;
    const how = err ? err.message : sig ? `signal ${sig}` : `exit code ${code}`;
    const tail = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
    if (this.current) this.fail(this.current, `connector ${this.opts.name}: the statement process ended (${how})${tail ? `: ${tail}` : ''}`);
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
    // Its statement is running: only killing the process stops it.
    const child = this.child;
    this.child = null;
    child?.kill('SIGKILL');
    this.fail(p, abortMessage(p.signal));
    this.pump();
  }

  /** Fails the call in flight; a write that was sent may have committed: its outcome is unknown. */
  private fail(p: Pending, message: string): void {
    if (this.current === p) this.current = null;
    if (p.writes) p.outcomeUnknown();
    this.settle(p, () => p.reject(new UpstreamError(message)));
  }

  private settle(p: Pending, done: () => void): void {
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
    case 'sqlite':
      if (f.code !== null && deterministicCodes.test(f.code)) return new DeterministicFailure(f.message || f.code, { sqlite_code: f.code });
      return new UpstreamError(f.message || 'sqlite error', { sqlite_code: f.code });
  }
}

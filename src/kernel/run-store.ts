/**
 * Rows of the run engine and the one way events are written: `RunWriter` appends events to a
 * run inside the caller's transaction, folds each through the reducer, and on flush stores the
 * new state, the work columns and the newly signed head with them. A state change and its
 * events therefore commit together or not at all.
 */
import { isoTime, type Clock } from '../clock.js';
import { canonicalEventTexts, eventHashOfTexts, signHead, type CanonicalEventTexts } from '../events/event-hash.js';
import { redactEventPayload } from '../events/redact-payload.js';
import type { ExternalEventKind, KernelEventKind } from '../events/kinds.js';
import type { KernelEventPayloads } from '../events/payloads.js';
import type { Redactor } from '../log/logger.js';
import type { SqlDb, SqlValue } from '../store/sql-db.js';
import type { RemitPayload, RunEvent, RunStateObject } from '../types.js';
import { publicState, reduceInPlace, workItem, type RunModel } from './reducer.js';

/** A row of `runs`. */
export interface RunRow {
  run_id: string;
  state: string;
  department: string;
  bundle_id: string;
  workflow: string;
  remit_id: string;
  parent_run_id: string | null;
  remit_token: string;
  remit_payload: string;
  model: string;
  last_seq: number;
  head_hash: string;
  head_signature: string;
  head_key_id: string;
  work_kind: string | null;
  work_step: string | null;
  work_ready_at: number | null;
  created_at: string;
  updated_at: string;
}

/** A row of `run_events`. */
export interface EventRow {
  run_id: string;
  seq: number;
  hash: string;
  prev_hash: string;
  kind: string;
  payload: string;
  actor: string;
  at: string;
}

/** A row of `leases`. */
export interface LeaseRow {
  lease_id: string;
  run_id: string;
  step: string;
  kind: string;
  attempt: number;
  worker_id: string;
  status: 'active' | 'completed' | 'failed' | 'expired' | 'released';
  ttl_seconds: number;
  expires_at: number;
  leased_at: number;
  ended_at: string | null;
}

/** An event to append, before its chain fields are filled in: a kernel kind with its own payload shape, or an external kind. */
export type EventDraft =
  | { [K in KernelEventKind]: { kind: K; payload: KernelEventPayloads[K]; actor: RunEvent['actor'] } }[KernelEventKind]
  | { kind: ExternalEventKind; payload: Record<string, unknown>; actor: RunEvent['actor'] };

/** The kernel's own actor on the events it appends. */
export const KERNEL_ACTOR = 'kernel';

/** A lease row with its BIGINT columns as numbers (PostgreSQL returns them as strings). */
export function normalizeLease(r: LeaseRow | undefined): LeaseRow | undefined {
  if (!r) return r;
  return { ...r, attempt: Number(r.attempt), ttl_seconds: Number(r.ttl_seconds), expires_at: Number(r.expires_at), leased_at: Number(r.leased_at) };
}

export async function loadRunRow(db: SqlDb, runId: string): Promise<RunRow | undefined> {
  return db.get<RunRow>('SELECT * FROM runs WHERE run_id = ?', [runId]);
}

/**
 * A run's remit id alone, for a caller that needs no more: a whole row costs 6–13 µs to read
 * (bench/README.md item 19), and every gateway call posts an event that asks this.
 */
export async function loadRunRemitId(db: SqlDb, runId: string): Promise<string | undefined> {
  return (await db.get<{ remit_id: string }>('SELECT remit_id FROM runs WHERE run_id = ?', [runId]))?.remit_id;
}

/** The columns a RunWriter works from: a third of the row's columns, none of its names and times. */
export type WriterRow = Pick<RunRow, 'run_id' | 'state' | 'model' | 'last_seq' | 'head_hash' | 'work_kind' | 'work_step' | 'work_ready_at' | 'remit_payload' | 'remit_token'>;

/**
 * The run as a writer needs it, read inside its transaction. Narrower than `SELECT *`: each
 * column read costs its conversion to a JS value (a run's row read whole: 6–13 µs, its model
 * alone 1.3 µs; bench/README.md item 19), and a cycle reads two runs this way.
 */
export async function loadWriterRow(db: SqlDb, runId: string): Promise<WriterRow | undefined> {
  return db.get<WriterRow>(db.dialect === 'postgres' ? WRITER_ROW_SQL_LOCKED : WRITER_ROW_SQL, [runId]);
}

const WRITER_ROW_SQL = 'SELECT run_id, state, model, last_seq, head_hash, work_kind, work_step, work_ready_at, remit_payload, remit_token FROM runs WHERE run_id = ?';
/**
 * PostgreSQL: two transactions writing one run (two lease requests racing for it) would both
 * append the run's next seq and one fail on run_events' key; the row lock makes the second
 * wait for the first and then retry from a fresh read (pg-db.ts). SQLite's writer is alone.
 */
const WRITER_ROW_SQL_LOCKED = `${WRITER_ROW_SQL} FOR UPDATE`;

export function parseEventRow(r: EventRow): RunEvent {
  return { seq: r.seq, hash: r.hash, prev_hash: r.prev_hash, kind: r.kind, payload: JSON.parse(r.payload), actor: JSON.parse(r.actor), at: r.at };
}

/** The GET /v1/runs/{id} object of a row. */
export function runStateOf(row: RunRow): RunStateObject & { parent_run_id: string | null } {
  const m = JSON.parse(row.model) as RunModel;
  return { ...publicState(m), last_seq: row.last_seq, head_hash: row.head_hash, head_signature: row.head_signature };
}

export interface WriterDeps {
  clock: Clock;
  keys: { keyId: string; sign(message: Uint8Array): Uint8Array };
  redactor: Redactor;
}

/**
 * Hashes `ev` (decisions §7) over its canonical payload and actor texts and sets `ev.hash`;
 * returns those texts, which are what is stored: replay hashes the stored text as it is.
 */
export function sealEvent(runId: string, ev: RunEvent): CanonicalEventTexts {
  const texts = canonicalEventTexts(ev);
  ev.hash = eventHashOfTexts(runId, ev, texts);
  return texts;
}

/** Writes one sealed event as its hashed texts. */
export async function insertEvent(tx: SqlDb, runId: string, ev: RunEvent, texts: CanonicalEventTexts): Promise<void> {
  await tx.run('INSERT INTO run_events (run_id, seq, hash, prev_hash, kind, payload, actor, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)', [
    runId,
    ev.seq,
    ev.hash,
    ev.prev_hash,
    ev.kind,
    texts.payload,
    texts.actor,
    ev.at,
  ]);
}

/**
 * The run row's columns that restate the model (lists, filters, counts and the lease queue
 * read them, never the model): written at creation from this, kept by RunWriter.flush, and
 * checked against the log by replay.
 */
export function modelColumns(model: RunModel): Pick<RunRow, 'state' | 'department' | 'bundle_id' | 'workflow' | 'work_kind' | 'work_step' | 'work_ready_at'> {
  const work = workColumns(model);
  return { state: model.state, department: model.department, bundle_id: model.bundle_id, workflow: model.workflow, work_kind: work.kind, work_step: work.step, work_ready_at: work.readyAt };
}

/** The runs row's indexed work columns for a model: the step a lease scan would find. */
function workColumns(model: RunModel): { kind: string | null; step: string | null; readyAt: number | null } {
  const work = workItem(model);
  return { kind: work?.kind ?? null, step: work?.step ?? null, readyAt: work ? Date.parse(work.ready_at) : null };
}

/** Appends to one run inside a transaction; `flush` writes the run row. */
export class RunWriter {
  /**
   * The state after the events appended so far: `before` itself until the first append, which
   * replaces it with the writer's own copy (parsed afresh from the row); later appends change
   * that copy in place. So a reference taken before any append keeps the starting state, and
   * one taken after an append sees the next ones. Never assign into it: before the first
   * append that would change `before`, and the first append would drop it.
   */
  model: RunModel;
  /** The state the transaction started from; never changed. */
  readonly before: RunModel;
  private ownsModel = false;
  readonly appended: RunEvent[] = [];
  private seq: number;
  private head: string;
  /** What the runs row holds now in its indexed columns (flush sets only what differs). */
  private stored: { state: string; work: { kind: string | null; step: string | null; readyAt: number | null } };

  constructor(
    readonly tx: SqlDb,
    readonly row: WriterRow,
    private readonly deps: WriterDeps,
    /** The model as the caller read it before the transaction, reused when still current. */
    read?: { text: string; model: RunModel },
  ) {
    this.model = read !== undefined && read.text === row.model ? read.model : (JSON.parse(row.model) as RunModel);
    this.before = this.model;
    this.stored = { state: row.state, work: { kind: row.work_kind, step: row.work_step, readyAt: row.work_ready_at === null ? null : Number(row.work_ready_at) } };
    this.seq = row.last_seq;
    this.head = row.head_hash;
  }

  get remit(): RemitPayload {
    return JSON.parse(this.row.remit_payload) as RemitPayload;
  }

  /** Appends events in order; each is folded into `model` before the next is written. */
  async append(...drafts: EventDraft[]): Promise<RunEvent[]> {
    const out: RunEvent[] = [];
    for (const d of drafts) {
      // Every payload is a JSON object; the typed shapes above lack index signatures.
      const payload = redactEventPayload(this.deps.redactor, d.kind, d.payload as unknown as Record<string, unknown>);
      const actor = this.deps.redactor.redactValue(d.actor ?? null);
      const ev: RunEvent = { seq: this.seq + 1, hash: '', prev_hash: this.head, kind: d.kind, payload, actor, at: isoTime(this.deps.clock.now()) };
      const texts = sealEvent(this.row.run_id, ev);
      // One copy per transaction rather than a structuredClone per event (bench/README.md).
      if (!this.ownsModel) {
        this.model = JSON.parse(this.row.model) as RunModel;
        this.ownsModel = true;
      }
      this.model = reduceInPlace(this.model, ev);
      await insertEvent(this.tx, this.row.run_id, ev, texts);
      this.seq = ev.seq;
      this.head = ev.hash;
      this.appended.push(ev);
      out.push(ev);
    }
    return out;
  }

  /**
   * Writes the state, work columns and the newly signed head (no-op when nothing was appended).
   * `state` and the work columns are set only when they changed: each is indexed, and setting
   * an indexed column rewrites its index page even to the same value (a WAL frame per index on
   * every external event and lease; bench/README.md).
   */
  async flush(): Promise<void> {
    if (this.appended.length === 0) return;
    const head = { run_id: this.row.run_id, seq: this.seq, hash: this.head };
    const signature = signHead((m) => this.deps.keys.sign(m), head);
    const sets = ['model = ?', 'last_seq = ?', 'head_hash = ?', 'head_signature = ?', 'head_key_id = ?', 'updated_at = ?'];
    const params: SqlValue[] = [JSON.stringify(this.model), this.seq, this.head, signature, this.deps.keys.keyId, this.model.updated_at];
    const stored = this.stored;
    if (this.model.state !== stored.state) {
      sets.push('state = ?');
      params.push(this.model.state);
    }
    const next = workColumns(this.model);
    if (next.kind !== stored.work.kind || next.step !== stored.work.step || next.readyAt !== stored.work.readyAt) {
      sets.push('work_kind = ?', 'work_step = ?', 'work_ready_at = ?');
      params.push(next.kind, next.step, next.readyAt);
    }
    params.push(this.row.run_id);
    await this.tx.run(`UPDATE runs SET ${sets.join(', ')} WHERE run_id = ?`, params);
    this.stored = { state: this.model.state, work: next };
  }
}

/**
 * Replay (decisions §7): checks every hash, every link and the signed head (`chain_errors`),
 * folds the log with the same reducer as the live path and compares the result with the stored
 * state (`state_matches`), and re-evaluates every `action.decided` with the pinned policy
 * versions as stored now (`decision_mismatches`), so an edited policy source is caught. The
 * records the kernel acts on beside the log (the run's signed remit, the approvals table, the
 * pinned bundle) are checked against it too (src/kernel/replay-records.ts).
 */
import { sha256Hex } from '../encoding/canonical-json.js';
import { jsonDepth } from '../encoding/json-limits.js';
import { notFound } from '../errors.js';
import { ChainVerifier, type ChainError, type StoredEventRow } from '../events/chain.js';
import type { ActionDecidedPayload, RunCreatedPayload } from '../events/payloads.js';
import { compilePolicy, type CompiledPolicy } from '../policy/compile.js';
import { decide } from '../policy/decide.js';
import type { PolicyService } from '../policy/policy-service.js';
import type { SqlDb } from '../store/sql-db.js';
import type { Decision, PolicyRef, RunEvent } from '../types.js';
import { Fold, publicState, type RunModel } from './reducer.js';
import type { RunEngine } from './run-engine.js';
import type { ApprovalRow } from './approvals.js';
import { approvalDecisionProblem, ApprovalMirror, boundRemit, bundleDifferences, sameAsLogged, sameJson, sameLoggedText } from './replay-records.js';
import { loadRunRow, modelColumns, type EventRow, type RunRow } from './run-store.js';
import { isRecord } from '../util/is-record.js';

export interface DecisionView {
  decision: Decision | null;
  rule: string | null;
  approver: string | null;
  error?: string;
}

export interface DecisionMismatch {
  seq: number;
  action_id: string;
  recorded: DecisionView;
  replayed: DecisionView;
}

export interface ReplayReport {
  run_id: string;
  chain_valid: boolean;
  /** Number of events read. */
  events: number;
  state_matches: boolean;
  /** Number of `action.decided` events re-evaluated. */
  decisions: number;
  decision_mismatches: DecisionMismatch[];
  chain_errors: ChainError[];
  /** The state re-derived from the log (null when the log does not fold). */
  state: (ReturnType<typeof publicState> & { last_seq: number; head_hash: string; head_signature: string }) | null;
  /**
   * Top-level members of the state that differ from the stored state, then the run row's
   * columns (`runs.state`, …) that disagree with the folded state, and `runs.model` when the
   * stored state is not readable at all; `runs.remit_token` / `runs.remit_payload` when the
   * run's remit is not its signed token's, `approvals.<id>[.<column>]` for an approval row the
   * log does not restate, and `bundles.<id>` when the run's bundle no longer hashes to its id.
   */
  state_differences: string[];
  /** Why the log does not fold into a state, when it does not. */
  replay_error: string | null;
}

type ParsedRow = RunEvent & Pick<StoredEventRow, 'stored'> & { unparseable?: boolean };

/**
 * Deeper than anything svc writes (request bodies stop at 64 levels, upstream answers at 256):
 * a row nested deeper was edited in, and would overflow the recursive walks of the check.
 */
const DEEPEST_STORED = 1000;

/** True when a stored text is nested deeper than svc writes (only a long text can be). */
function tooDeep(text: string): boolean {
  return text.length > 2 * DEEPEST_STORED && jsonDepth(text) > DEEPEST_STORED;
}

function parseRow(r: Omit<EventRow, 'run_id'>): ParsedRow {
  try {
    if (tooDeep(r.payload) || tooDeep(r.actor)) throw new Error('nested too deep');
    const payload = JSON.parse(r.payload) as unknown;
    // svc writes every payload as a JSON object; anything else in the column was put there by hand.
    if (!isRecord(payload)) throw new Error('payload is not an object');
    return { seq: r.seq, hash: r.hash, prev_hash: r.prev_hash, kind: r.kind, payload, actor: JSON.parse(r.actor), at: r.at, stored: { payload: r.payload, actor: r.actor } };
  } catch {
    return { seq: r.seq, hash: r.hash, prev_hash: r.prev_hash, kind: r.kind, payload: {}, actor: null, at: r.at, unparseable: true };
  }
}

function view(d: { decision: Decision; rule: string; approver: string | null }): DecisionView {
  return { decision: d.decision, rule: d.rule, approver: d.approver ?? null };
}

function sameView(a: DecisionView, b: DecisionView): boolean {
  return !a.error && !b.error && a.decision === b.decision && a.rule === b.rule && sameApprover(a.approver ?? null, b.approver ?? null);
}

/**
 * The log's approver went through the redactor with the values registered when it was written
 * (src/events/redact-payload.ts); replay derives it afresh. Equal when both read alike through
 * today's redactor, or when the recorded one's `[REDACTED]` parts stand for text the replayed
 * one has there (a value registered then and no longer, or since).
 */
export function sameApprover(recorded: string | null, replayed: string | null): boolean {
  // A log edited by hand may hold any JSON value here.
  if (typeof recorded !== 'string' || typeof replayed !== 'string') return recorded === replayed;
  return sameLoggedText(recorded, replayed);
}

/** The run's requester as its first event names it (decisions 5.4: who may not approve). */
function requesterOf(created: RunCreatedPayload): string | null {
  const id = (created.requested_by as unknown as Record<string, unknown> | null)?.id;
  return typeof id === 'string' ? id : null;
}

/** The stored state, or null when the row's model is not a JSON object (a damaged store). */
function storedModel(row: RunRow): RunModel | null {
  try {
    const m = JSON.parse(row.model) as unknown;
    return isRecord(m) ? (m as unknown as RunModel) : null;
  } catch {
    return null;
  }
}

/**
 * The run row's columns that disagree with the folded state: a row edited beside its model
 * would list as one thing and read as another. Those restating the model (modelColumns), and
 * the ones run creation takes from its request and first event, which the model records too.
 */
function rowDifferences(row: RunRow, derived: RunModel): string[] {
  const expected: Record<string, unknown> = {
    ...modelColumns(derived),
    remit_id: derived.remit_id,
    parent_run_id: derived.parent_run_id,
    created_at: derived.created_at,
    updated_at: derived.updated_at,
  };
  const stored = { ...row, work_ready_at: row.work_ready_at === null ? null : Number(row.work_ready_at) } as unknown as Record<string, unknown>;
  return Object.keys(expected)
    .filter((column) => (stored[column] ?? null) !== (expected[column] ?? null))
    .map((column) => `runs.${column}`);
}

/**
 * Events replay reads, checks and folds at a time. Between pages the event loop is let go (other
 * requests are answered) and only one page is held: a 50,000-event run read and checked in
 * one turn held svcd for 0.3 s (6 µs an event) and grew it by 30 MB.
 */
export const REPLAY_PAGE = 2000;

/** Stored policies as replay reads them: by name and version, their source as it is now. */
type PolicySources = Pick<PolicyService, 'get'>;

/**
 * The `decision_mismatches` check: each `action.decided` of the log, read in seq order, is
 * decided again from the log before it (approvals) and the policy sources as stored now,
 * compiled afresh (once per source), and compared with what was recorded.
 */
class DecisionCheck {
  readonly mismatches: DecisionMismatch[] = [];
  /** Number of `action.decided` events re-evaluated. */
  decisions = 0;
  /** The approvals the log requested and decided so far (compared with the table at the end). */
  readonly approvals = new ApprovalMirror();
  private requester: string | null = null;
  private readonly compiled = new Map<string, CompiledPolicy | Error>();

  constructor(
    private readonly policies: PolicySources,
    private readonly row: RunRow,
    private readonly bound: ReturnType<typeof boundRemit>,
  ) {}

  /** The next events of the log, in seq order. */
  async push(events: readonly ParsedRow[]): Promise<void> {
    for (const ev of events) {
      if (ev.unparseable) continue;
      if (ev.kind === 'run.created') this.requester = requesterOf(ev.payload as unknown as RunCreatedPayload);
      this.approvals.add(ev);
      if (ev.kind !== 'action.decided') continue;
      this.decisions++;
      const p = ev.payload as unknown as ActionDecidedPayload;
      const recorded: DecisionView = { decision: p.decision, rule: p.rule, approver: p.approver ?? null };
      try {
        const replayed = await this.redecide(p, recorded);
        if (!sameView(recorded, replayed)) this.mismatches.push({ seq: ev.seq, action_id: p.action_id, recorded, replayed });
      } catch (err) {
        // A row edited by hand can hold anything where a decision was: say so at its seq.
        this.mismatches.push({ seq: ev.seq, action_id: String(p.action_id), recorded, replayed: { decision: null, rule: null, approver: null, error: `the recorded decision cannot be checked: ${(err as Error).message}` } });
      }
    }
  }

  /**
   * `ref` as stored, compiled for replay. `matches`: the engine its `matches` runs on: RE2, or
   * the JS RegExp a decision recorded before 2026-11-29 was made with. Null for `js-regexp`
   * when the source has no `matches` (the decision cannot depend on the engine).
   */
  private async loadPolicy(ref: PolicyRef, matches: 're2' | 'js-regexp' = 're2'): Promise<CompiledPolicy | null> {
    const stored = await this.policies.get(ref.name, ref.version);
    if (matches === 'js-regexp' && !stored.source.includes('matches')) return null;
    const key = `${matches}:${ref.name}@${ref.version}#${sha256Hex(stored.source)}`;
    let c = this.compiled.get(key);
    if (!c) {
      try {
        c = compilePolicy({ name: ref.name, version: ref.version }, stored.source, { stored: true, matches });
      } catch (err) {
        c = err instanceof Error ? err : new Error(String(err));
      }
      this.compiled.set(key, c);
    }
    if (c instanceof Error) throw c;
    return c;
  }

  /** The decision an `action.decided` should have recorded, from the log before it and the stored policies. */
  private async redecide(p: ActionDecidedPayload, recorded: DecisionView): Promise<DecisionView> {
    if (p.source === 'approval') {
      const id = p.approval_id ?? '';
      const req = this.approvals.get(id)?.requested;
      const dec = this.approvals.get(id)?.decided;
      if (!req || req.action_id !== p.action_id) return { decision: null, rule: null, approver: null, error: `no approval ${id} for action ${p.action_id} earlier in the log` };
      if (!dec) return { decision: 'approval_required', rule: req.rule, approver: req.approver };
      const wrongDecider = approvalDecisionProblem(req, dec.actor, this.requester);
      if (wrongDecider) return { decision: 'approval_required', rule: req.rule, approver: req.approver, error: wrongDecider };
      if (dec.payload.decision === 'approved') return { decision: 'allow', rule: `approved:${id}`, approver: req.approver };
      return { decision: 'deny', rule: `rejected:${id}`, approver: req.approver };
    }
    // Decided again under the run's remit as signed: the recorded context's remit was read
    // from runs.remit_payload, which an edit there would have widened.
    const bound = this.bound;
    const remitEdited = bound.remit !== null && !sameAsLogged(p.run?.remit, bound.remit);
    const run = remitEdited ? { ...p.run, remit: bound.remit! } : p.run;
    let replayed: DecisionView;
    try {
      const policies: CompiledPolicy[] = [];
      for (const ref of p.policies) policies.push((await this.loadPolicy(ref))!);
      replayed = view(decide(policies, p.action, run)); // its approver compared as sameApprover says
    } catch (err) {
      return { decision: null, rule: null, approver: null, error: (err as Error).message };
    }
    if (remitEdited) replayed.error = `decided under a remit other than the run's signed remit ${this.row.remit_id}`;
    else if (!sameView(recorded, replayed) && (await this.decidedOnJsRegExp(p, recorded))) return recorded;
    return replayed;
  }

  /**
   * Whether the pinned policies decide `recorded` with `matches` on the JS RegExp, the engine
   * svc decided with until 2026-11-29: a decision made then on text the two engines read
   * differently (`.` and `\r`, `\s` and U+00A0, characters outside the BMP, a stored
   * policy's pattern from the data such as `(?i)…`) is the policy's decision all the same.
   */
  private async decidedOnJsRegExp(p: ActionDecidedPayload, recorded: DecisionView): Promise<boolean> {
    try {
      const policies: CompiledPolicy[] = [];
      let usesMatches = false;
      for (const ref of p.policies) {
        const c = await this.loadPolicy(ref, 'js-regexp');
        usesMatches ||= c !== null;
        policies.push(c ?? (await this.loadPolicy(ref))!);
      }
      return usesMatches && sameView(recorded, view(decide(policies, p.action, p.run)));
    } catch {
      return false;
    }
  }
}

/**
 * One page of run `runId`'s events after seq `after`. `after` null: from the first row, however
 * low its seq (a hand-put row may sit below any bound). `pastHead`: only rows past the head,
 * and only while the head is still the one in `row`, checked in the same statement (one
 * snapshot) as the rows are read.
 */
function readEventPage(db: SqlDb, runId: string, row: RunRow, after: number | null, pastHead: boolean): Promise<Array<Omit<EventRow, 'run_id'>>> {
  const where = ['run_id = ?'];
  const params: (string | number | null)[] = [runId];
  if (after !== null) {
    where.push('seq > ?');
    params.push(after);
  }
  if (pastHead) {
    where.push('(SELECT last_seq FROM runs WHERE run_id = ?) = ?');
    params.push(runId, row.last_seq);
  } else {
    where.push('seq <= ?');
    params.push(row.last_seq);
  }
  // Not `*`: run_id is known, and every column read is a string made per row (about half a
  // microsecond each here, a measurable part of replaying 100,000 events).
  return db.all<Omit<EventRow, 'run_id'>>(`SELECT seq, hash, prev_hash, kind, payload, actor, at FROM run_events WHERE ${where.join(' AND ')} ORDER BY seq LIMIT ?`, [...params, REPLAY_PAGE]);
}

/** Top-level members of the stored state that differ from the derived one. */
function modelDifferences(stored: RunModel, derived: RunModel): string[] {
  const a = stored as unknown as Record<string, unknown>;
  const b = derived as unknown as Record<string, unknown>;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].filter((key) => !sameJson(a[key], b[key]));
}

export async function replayRun(e: RunEngine, runId: string): Promise<ReplayReport> {
  const k = e.k;
  const row = await loadRunRow(k.db, runId);
  if (!row) throw notFound('run', runId);
  const bound = boundRemit(row, k.keys);
  const check = new DecisionCheck(k.policies, row, bound);

  const chain = new ChainVerifier(runId);
  const fold = new Fold();
  let replayError: string | null = null;
  let count = 0;
  let last: ParsedRow | undefined;
  const readPages = async (after: number | null, pastHead: boolean): Promise<void> => {
    for (;;) {
      const rows = await readEventPage(k.db, runId, row, after, pastHead);
      if (rows.length === 0) return;
      const events = rows.map(parseRow);
      chain.push(events);
      if (replayError === null) {
        try {
          fold.push(events.filter((ev) => !ev.unparseable));
        } catch (err) {
          replayError = (err as Error).message;
        }
      }
      await check.push(events);
      count += events.length;
      last = events[events.length - 1];
      after = rows[rows.length - 1]!.seq;
      if (rows.length < REPLAY_PAGE) return;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };
  // The log up to the head read above; then rows past that head, as long as the head has not
  // moved: a writer moves the head with each append, so those were put there by hand (and the
  // chain check reports them), while rows appended during the replay belong to a later head.
  await readPages(null, false);
  await readPages(last?.seq ?? null, true);
  const chainErrors = chain.finish({ run_id: runId, seq: row.last_seq, hash: row.head_hash, signature: row.head_signature, key_id: row.head_key_id }, k.keys);

  let derived: RunModel | null = null;
  if (replayError === null) {
    try {
      derived = fold.result();
    } catch (err) {
      replayError = (err as Error).message;
    }
  }
  const stored = storedModel(row);
  const differences: string[] = [];
  if (stored === null) differences.push('runs.model');
  if (derived) {
    if (stored) differences.push(...modelDifferences(stored, derived));
    differences.push(...rowDifferences(row, derived));
  }
  differences.push(...bound.differences);
  const approvalRows = await k.db.all<ApprovalRow>('SELECT * FROM approvals WHERE run_id = ? ORDER BY approval_id', [runId]);
  differences.push(...check.approvals.differences(approvalRows));
  differences.push(...bundleDifferences(row.bundle_id, await k.db.get<{ body: string }>('SELECT body FROM bundles WHERE bundle_id = ?', [row.bundle_id])));
  const stateMatches = derived !== null && differences.length === 0;

  return {
    run_id: runId,
    chain_valid: chainErrors.length === 0,
    events: count,
    state_matches: stateMatches,
    decisions: check.decisions,
    decision_mismatches: check.mismatches,
    chain_errors: chainErrors,
    state: derived ? { ...publicState(derived), last_seq: last?.seq ?? 0, head_hash: last?.hash ?? '', head_signature: row.head_signature } : null,
    state_differences: differences,
    replay_error: replayError,
  };
}

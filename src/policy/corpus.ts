/**
 * Policy test corpora (decisions 5.3): cases `{action, run}` as people write them, filled in to
 * the full `action` and `run` a policy sees, and the flip comparison of two policies.
 *
 * Members a case leaves out get defaults: `connector` and `operation` from `tool`, `args` {},
 * `writes` and `system_of_record` true (the kernel's view of a tool it cannot describe,
 * decisions 5.2), `summary` "", and for `run` empty strings, `input` {}, `usage` zero and
 * `remit` `{autonomy: "supervised", grants: [], tools: [], scopes: []}`.
 */
import { tooDeep } from '../bundle/json-depth.js';
import { SvcError } from '../errors.js';
import { AUTONOMY_ORDER, type Autonomy, type Decision, type PolicyAction, type PolicyRunContext } from '../types.js';
import type { CompiledPolicy } from './compile.js';
import { decide, DecisionInProgress } from './decide.js';
import { isRecord } from '../util/is-record.js';

/** One corpus case, filled in. */
export interface CorpusCase {
  action: PolicyAction;
  run: PolicyRunContext;
}

/** A case whose decision differs between policy A and policy B. */
export interface Flip {
  index: number;
  a: Decision;
  b: Decision;
  rule_a: string;
  rule_b: string;
  /**
   * With `explain` (svc's extension of the request): the conditions that failed while the
   * case was decided under A (under B), present only when there are any (decisions 5.1: such
   * a condition counts as matched for deny and require_approval). A flip to approval_required
   * by a rule whose condition reads `action.args.ticketid` for `ticket_id` is a flip the
   * author did not write.
   */
  errors_a?: Array<{ rule: string; message: string }>;
  errors_b?: Array<{ rule: string; message: string }>;
}

/**
 * With `explain`: a case approval_required under both policies whose approver differs (B routes
 * it to `role:cfo` where A asked `role:finance`). No flip (decisions 5.3 flips are decisions),
 * but a change an author reviewing B wants to see.
 */
export interface ApproverChange {
  index: number;
  /** The approvers under A and under B (`role:<role>`). */
  a: string;
  b: string;
  rule_a: string;
  rule_b: string;
}

/** The approver change of one case, when there is one. */
function approverChangeOf(index: number, da: ReturnType<typeof decide>, db: ReturnType<typeof decide>): ApproverChange | null {
  if (da.decision !== 'approval_required' || db.decision !== 'approval_required' || da.approver === db.approver) return null;
  return { index, a: da.approver ?? '', b: db.approver ?? '', rule_a: da.rule, rule_b: db.rule };
}

/** What a comparison finds: the flips, and with `explain` the approver changes. */
export interface Comparison {
  cases: number;
  flips: Flip[];
  /** Present with `explain` only (svc's extension), so the contract's answer keeps its shape. */
  approver_changes?: ApproverChange[];
}

/** Adds one case's decisions under A and B to `out`. */
function compareCase(out: Comparison, index: number, da: ReturnType<typeof decide>, db: ReturnType<typeof decide>, explain: boolean): void {
  if (da.decision !== db.decision) out.flips.push(flipOf(index, da, db, explain));
  else if (explain) {
    const change = approverChangeOf(index, da, db);
    if (change) out.approver_changes!.push(change);
  }
}

/** A flip in the contract's shape; with `explain`, also the conditions that failed on either side. */
function flipOf(index: number, da: ReturnType<typeof decide>, db: ReturnType<typeof decide>, explain: boolean): Flip {
  const flip: Flip = { index, a: da.decision, b: db.decision, rule_a: da.rule, rule_b: db.rule };
  if (explain && da.errors.length > 0) flip.errors_a = da.errors;
  if (explain && db.errors.length > 0) flip.errors_b = db.errors;
  return flip;
}

/** Most cases in one test request. */
export const MAX_CORPUS_CASES = 10_000;
/** Deepest nesting of a case's action or run. */
export const MAX_CASE_DEPTH = 32;

function invalid(path: string, message: string): SvcError {
  return new SvcError('request_invalid', `${path} ${message}`, { path });
}

function str(obj: Record<string, unknown>, key: string, path: string, def: string): string {
  const v = obj[key];
  if (v === undefined) return def;
  if (typeof v !== 'string') throw invalid(`${path}/${key}`, 'must be a string');
  return v;
}

function bool(obj: Record<string, unknown>, key: string, path: string, def: boolean): boolean {
  const v = obj[key];
  if (v === undefined) return def;
  if (typeof v !== 'boolean') throw invalid(`${path}/${key}`, 'must be a boolean');
  return v;
}

function strings(obj: Record<string, unknown>, key: string, path: string): string[] {
  const v = obj[key];
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw invalid(`${path}/${key}`, 'must be an array of strings');
  return v as string[];
}

function num(obj: Record<string, unknown>, key: string, path: string): number {
  const v = obj[key];
  if (v === undefined) return 0;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw invalid(`${path}/${key}`, 'must be a number');
  return v;
}

/** Fills in an action; `path` is the JSON pointer of the action for messages. */
export function toPolicyAction(value: unknown, path = '/action'): PolicyAction {
  if (!isRecord(value)) throw invalid(path, 'must be an object');
  const tool = value.tool;
  if (typeof tool !== 'string' || tool === '') throw invalid(`${path}/tool`, 'must be a non-empty string');
  const dot = tool.indexOf('.');
  const args = value.args ?? {};
  if (!isRecord(args)) throw invalid(`${path}/args`, 'must be an object');
  return {
    tool,
    connector: str(value, 'connector', path, dot > 0 ? tool.slice(0, dot) : tool),
    operation: str(value, 'operation', path, dot > 0 ? tool.slice(dot + 1) : ''),
    args,
    writes: bool(value, 'writes', path, true),
    system_of_record: bool(value, 'system_of_record', path, true),
    summary: str(value, 'summary', path, ''),
  };
}

/** Fills in a run context; `path` is the JSON pointer of the run for messages. */
export function toPolicyRun(value: unknown, path = '/run'): PolicyRunContext {
  const run = value === undefined ? {} : value;
  if (!isRecord(run)) throw invalid(path, 'must be an object');
  const rb = run.requested_by ?? {};
  if (!isRecord(rb)) throw invalid(`${path}/requested_by`, 'must be an object');
  const usage = run.usage ?? {};
  if (!isRecord(usage)) throw invalid(`${path}/usage`, 'must be an object');
  const remit = run.remit ?? {};
  if (!isRecord(remit)) throw invalid(`${path}/remit`, 'must be an object');
  const autonomy = remit.autonomy ?? 'supervised';
  if (typeof autonomy !== 'string' || !AUTONOMY_ORDER.includes(autonomy as Autonomy)) {
    throw invalid(`${path}/remit/autonomy`, `must be one of ${AUTONOMY_ORDER.join(', ')}`);
  }
  return {
    id: str(run, 'id', path, 'run_test'),
    bundle: str(run, 'bundle', path, ''),
    workflow: str(run, 'workflow', path, ''),
    department: str(run, 'department', path, ''),
    requested_by: {
      id: str(rb, 'id', `${path}/requested_by`, ''),
      role: str(rb, 'role', `${path}/requested_by`, ''),
      manager: str(rb, 'manager', `${path}/requested_by`, ''),
    },
    input: run.input === undefined ? {} : run.input,
    usage: { tokens: num(usage, 'tokens', `${path}/usage`), usd: num(usage, 'usd', `${path}/usage`) },
    remit: {
      autonomy: autonomy as Autonomy,
      grants: strings(remit, 'grants', `${path}/remit`),
      tools: strings(remit, 'tools', `${path}/remit`),
      scopes: strings(remit, 'scopes', `${path}/remit`),
    },
  };
}

/** Fills in every case of a corpus; errors point into `/corpus/<i>/…`. */
export function normalizeCorpus(corpus: unknown, path = '/corpus'): CorpusCase[] {
  if (!Array.isArray(corpus)) throw invalid(path, 'must be an array of {action, run}');
  if (corpus.length > MAX_CORPUS_CASES) throw invalid(path, `has more than ${MAX_CORPUS_CASES} cases`);
  return corpus.map((c, i) => {
    if (!isRecord(c)) throw invalid(`${path}/${i}`, 'must be an object {action, run}');
    const deep = tooDeep(c, MAX_CASE_DEPTH);
    if (deep !== null) throw invalid(`${path}/${i}${deep}`, `is nested deeper than ${MAX_CASE_DEPTH} levels`);
    return { action: toPolicyAction(c.action, `${path}/${i}/action`), run: toPolicyRun(c.run, `${path}/${i}/run`) };
  });
}

/** Every case under A alone and under B alone (each with the default rule); the flips. */
export function comparePolicies(a: CompiledPolicy, b: CompiledPolicy, cases: readonly CorpusCase[], explain = false): Comparison {
  const out: Comparison = { cases: cases.length, flips: [], ...(explain ? { approver_changes: [] } : {}) };
  cases.forEach((c, index) => compareCase(out, index, decide([a], c.action, c.run), decide([b], c.action, c.run), explain));
  return out;
}

/**
 * How long a policy test evaluates before it lets the event loop turn, in ms. A 1000-rule
 * policy over 10,000 cases is 10–20 s of evaluation: in one piece it held every other request
 * of the kernel (health, heartbeats, proposals) that long.
 */
export const TEST_SLICE_MS = 10;

export interface CompareOptions {
  /** Evaluation between two turns of the event loop, in ms. (Default: TEST_SLICE_MS) */
  sliceMs?: number;
  /** Stops the comparison between two slices; it then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Flips also carry the conditions that failed (`errors_a`, `errors_b`). */
  explain?: boolean;
}

/**
 * comparePolicies without holding the event loop: rules are evaluated for about `sliceMs`,
 * then the comparison waits for one turn of the event loop (setImmediate, after pending I/O)
 * before it goes on, so the kernel answers other requests meanwhile. The pause can fall
 * between two rules of one case, since one case of a large policy can take long on its own.
 * The answer is comparePolicies's, flip for flip.
 */
export async function comparePoliciesInSlices(
  a: CompiledPolicy,
  b: CompiledPolicy,
  cases: readonly CorpusCase[],
  opts: CompareOptions = {},
): Promise<Comparison> {
  const sliceMs = opts.sliceMs ?? TEST_SLICE_MS;
  const signal = opts.signal;
  signal?.throwIfAborted();
  let sliceEnd = performance.now() + sliceMs;
  const decideAlone = async (policy: CompiledPolicy, c: CorpusCase) => {
    const decision = new DecisionInProgress(c.action, c.run);
    for (const rule of policy.rules) {
      if (performance.now() >= sliceEnd) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        signal?.throwIfAborted();
        sliceEnd = performance.now() + sliceMs;
      }
      decision.evaluate(policy, rule);
    }
    return decision.result();
  };
  const explain = opts.explain === true;
  const out: Comparison = { cases: cases.length, flips: [], ...(explain ? { approver_changes: [] } : {}) };
  for (let index = 0; index < cases.length; index++) {
    const c = cases[index]!;
    const da = await decideAlone(a, c);
    const db = await decideAlone(b, c);
    compareCase(out, index, da, db, explain);
  }
  return out;
}

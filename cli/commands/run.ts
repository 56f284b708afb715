/**
 * `svc run`: runs on the kernel (interface 2.4, 2.5, 4.1, 6; decisions §6–§8).
 *   svc run start BUNDLE WORKFLOW [--input @FILE|@-|JSON] --remit ID [--requested-by ID:ROLE:MANAGER]
 *   svc run list [--state S] [--department D] [--limit N] [--after CURSOR]
 *   svc run show ID
 *   svc run events ID [--from-seq N] [--follow]
 *   svc run replay ID            exits 1 when anything does not check out
 *   svc run abandon ID --reason R   an actor is required (--actor or SVC_ACTOR)
 *   svc run resume ID               an actor is required (--actor or SVC_ACTOR)
 *   svc run retry-compensations ID [--reason R]   an actor is required (--actor or SVC_ACTOR)
 * BUNDLE is a bundle id (`bnd_…`) or NAME[@VERSION] (the newest version when none is given).
 * Each handler returns data; `registerRun` wires them to argv.
 */
import { Option, type Command } from 'commander';
import type { ReplayReport } from '../../src/kernel/replay.js';
import type { RunEvent, RunStateObject } from '../../src/types.js';
import { actorOf, globals, kernelClient, output, table } from '../context.js';
import { CliError, EXIT, usageError } from '../exit.js';
import { jsonArgument, type ReadFile } from '../json-argument.js';
import { isObject, type SvcHttpClient } from '../http-client.js';
import { resolveBundle } from './bundle-ref.js';
import { parseRequestedBy, remitIdArgument } from './remit-args.js';
import { anyToolMatches } from '../../src/remit/patterns.js';
import { wholeOf } from '../../src/util/number-text.js';
import { clean, columns, pad, terminalJson } from '../terminal-text.js';

export const RUN_STATES = ['running', 'parked', 'completed', 'failed', 'abandoning', 'abandoned'] as const;

type Run = RunStateObject & { parent_run_id?: string | null };

/** `--input`: `@FILE`, `@-` (stdin) or inline JSON. */
export function parseInput(value: string | undefined, readFile?: ReadFile): unknown {
  return value === undefined ? {} : jsonArgument(value, { flag: '--input', readFile });
}


export interface StartFlags {
  input?: string;
  remit: string;
  requestedBy?: string;
}

/** POST /v1/runs. */
export async function handleStart(
  client: SvcHttpClient,
  bundle: string,
  workflow: string,
  f: StartFlags,
  warn: (line: string) => void = () => {},
): Promise<{ run_id: string; state: string }> {
  const input = parseInput(f.input); // local mistakes first, before asking the daemon anything
  const remitId = remitIdArgument(f.remit, '--remit');
  const bundleId = await resolveBundle(client, bundle);
  const body: Record<string, unknown> = { bundle_id: bundleId, workflow, input, remit_id: remitId };
  if (f.requestedBy !== undefined) body.requested_by = parseRequestedBy(f.requestedBy);
  const started = (await client.request<{ run_id: string; state: string }>('POST', '/runs', body, {}, ['run_id', 'state'])).body;
  try {
    const [b, r] = await Promise.all([
      client.request<{ bundle?: unknown }>('GET', `/bundles/${encodeURIComponent(bundleId)}`),
      client.request<{ tools?: unknown; autonomy?: unknown }>('GET', `/remits/${encodeURIComponent(remitId)}`),
    ]);
    for (const line of remitGaps(b.body.bundle, workflow, remitId, r.body)) warn(`run ${started.run_id}: ${line}`);
  } catch {
    /* the run started; a note that cannot be had is not an error */
  }
  return started;
}

/**
 * The calls a workflow's steps are written to make that its run's remit refuses at the
 * gateway: a tool no pattern of the remit matches (tool_not_in_remit), and a tool the bundle
 * declares as writing under observe or propose (autonomy_too_low). Each would quarantine its
 * step only when it is reached, after earlier steps wrote, and a bound remit cannot be
 * widened: said when the run starts. A model step's tools are the model's to call or not.
 */
export function remitGaps(bundle: unknown, workflow: string, remitId: string, remit: { tools?: unknown; autonomy?: unknown }): string[] {
  const obj = (v: unknown): Record<string, unknown> | null => (isObject(v) ? v : null);
  const tools = Array.isArray(remit.tools) ? remit.tools.filter((t): t is string => typeof t === 'string') : null;
  const steps = obj(obj(obj(bundle)?.workflows)?.[workflow])?.steps;
  if (!tools || !Array.isArray(steps)) return [];
  const declared = obj(obj(bundle)?.tools) ?? {};
  const readOnly = remit.autonomy === 'observe' || remit.autonomy === 'propose';
  const out: string[] = [];
  for (const step of steps) {
    const s = obj(step);
    if (!s || typeof s.id !== 'string') continue;
    const calls: Array<[string, string]> = [];
    if ((s.kind === 'tool' || s.kind === 'action') && typeof s.tool === 'string') calls.push([s.tool, 'calls']);
    const comp = obj(s.compensate);
    if (comp && typeof comp.tool === 'string') calls.push([comp.tool, 'compensates with']);
    for (const [tool, how] of calls) {
      // A refused step call quarantines the step; a refused compensation is not retried: it
      // fails for good when the run is abandoned, and the write it was to undo stays.
      const then = how === 'calls' ? 'and quarantine the step' : `when the run is abandoned after step ${s.id} completed, so that compensation fails for good (compensation_failed) and the step's write stays`;
      if (!anyToolMatches(tools, tool)) {
        out.push(`step ${s.id} ${how} ${tool}, which remit ${remitId} does not grant (its tools: ${tools.join(', ') || 'none'}): the gateway will refuse it (tool_not_in_remit) ${then}; a remit cannot be widened once a run binds it, so abandon this run and start it with a remit that grants the tool`);
      } else if (readOnly && obj(declared[tool])?.writes === true) {
        out.push(`step ${s.id} ${how} ${tool}, which the bundle declares as writing, and remit ${remitId} has autonomy ${String(remit.autonomy)}: the gateway will refuse it (autonomy_too_low) ${then}`);
      }
    }
  }
  return out;
}

export interface ListFlags {
  state?: string;
  department?: string;
  limit?: string;
  after?: string;
}

/**
 * The command that prints the next page, pasteable: the same filters and page size, the new
 * cursor, and the daemon it asked when that came from a flag (an environment variable carries
 * over by itself), never the token (a secret on screen).
 */
function nextPageCommand(f: ListFlags, next: string, daemon: { kernelUrl?: string; token?: string }): string {
  const words = ['svc'];
  if (daemon.kernelUrl) words.push(`--kernel-url ${shellWord(daemon.kernelUrl)}`);
  if (daemon.token) words.push('--token …');
  words.push('run list');
  if (f.state) words.push(`--state ${f.state}`);
  if (f.department) words.push(`--department ${shellWord(f.department)}`);
  if (f.limit) words.push(`--limit ${f.limit}`);
  words.push(`--after ${next}`);
  return words.join(' ');
}

/** A word the shell reads back as itself. */
function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`;
}

/** GET /v1/runs (one page). */
export async function handleList(client: SvcHttpClient, f: ListFlags): Promise<{ runs: Run[]; next: string | null }> {
  const q = new URLSearchParams();
  if (f.state) q.set('state', f.state);
  if (f.department) q.set('department', f.department);
  if (f.limit) {
    if (!/^\d+$/.test(f.limit) || Number(f.limit) < 1 || Number(f.limit) > 500) throw usageError(`--limit must be an integer from 1 to 500, got "${f.limit}"`);
    q.set('limit', f.limit);
  }
  if (f.after) q.set('after', f.after);
  const qs = q.toString();
  return (await client.request<{ runs: Run[]; next: string | null }>('GET', `/runs${qs ? `?${qs}` : ''}`, undefined, {}, ['runs'])).body;
}

export async function handleShow(client: SvcHttpClient, id: string): Promise<Run> {
  return (await client.request<Run>('GET', `/runs/${encodeURIComponent(id)}`, undefined, {}, ['run_id', 'state'])).body;
}

export async function handleEventsPage(client: SvcHttpClient, id: string, fromSeq: number, limit = 1000): Promise<{ events: RunEvent[]; next_seq: number }> {
  return (await client.request<{ events: RunEvent[]; next_seq: number }>('GET', `/runs/${encodeURIComponent(id)}/events?from_seq=${fromSeq}&limit=${limit}`, undefined, {}, ['events', 'next_seq'])).body;
}

export async function handleReplay(client: SvcHttpClient, id: string): Promise<ReplayReport> {
  return (await client.request<ReplayReport>('POST', `/runs/${encodeURIComponent(id)}/replay`)).body;
}

/** True when replay found nothing wrong. */
export function replayChecksOut(r: ReplayReport): boolean {
  return r.chain_valid && r.state_matches && r.decision_mismatches.length === 0 && r.chain_errors.length === 0;
}

export interface AbandonAnswer {
  compensations_scheduled: number;
  state?: string;
  uncompensated_writes?: Array<{ seq: number; kind: string; step: string; tool: string; called_seq?: number; outcome?: string; calls?: number; last_called_seq?: number }>;
  uncompensated_writes_total?: number;
}

export async function handleAbandon(
  client: SvcHttpClient,
  id: string,
  reason: string,
  actor: { id: string; role: string },
  warn: (line: string) => void = () => {},
): Promise<AbandonAnswer> {
  const answer = (await client.request<AbandonAnswer>('POST', `/runs/${encodeURIComponent(id)}/abandon`, { reason, actor }, {}, ['compensations_scheduled'])).body;
  if (answer.compensations_scheduled > 0) {
    // Compensations call the gateway with the run's remit: once it expired, every one is
    // refused (remit_expired) and fails for good, and nothing says so until the run ends.
    const ended = await expiredRemitOf(client, id);
    if (ended) {
      warn(
        `run ${id}: its remit ${ended.remitId} expired at ${ended.at}, and the gateway refuses every call of the run (remit_expired), its compensations too: each fails for good (compensation_failed) and the write it was to undo stays; undo those writes by hand`,
      );
    }
  }
  return answer;
}

/** What abandon did, and the writes of unfinished steps it cannot undo, for a person. */
export function abandonHuman(id: string, x: AbandonAnswer): string {
  const lines = [`run ${id} ${x.state ?? 'abandoning'}: ${x.compensations_scheduled} compensation(s) scheduled`];
  const writes = x.uncompensated_writes ?? [];
  const total = Math.max(x.uncompensated_writes_total ?? 0, writes.length);
  if (total > 0) {
    lines.push(`${total} write(s) of steps that never completed are not compensated; check them by hand:`);
    for (const w of writes) {
      // The gateway's outcome tells the operator where to look: `ok` wrote; a failure may have.
      const said = w.outcome !== undefined ? `: ${w.outcome}` : '';
      const again = w.calls !== undefined && w.last_called_seq !== undefined ? `, ${w.calls} times in all, last at event ${w.last_called_seq}` : '';
      const ran = w.called_seq !== undefined ? `; the gateway called it at event ${w.called_seq}${again}${said}` : said && `; outcome${said}`;
      lines.push(`  step ${w.step}: ${w.tool} (event ${w.seq}, ${w.kind}${ran})`);
    }
    if (total > writes.length) lines.push(`  … and ${total - writes.length} more (svc run events shows them all)`);
  }
  return lines.join('\n');
}

export async function handleResume(client: SvcHttpClient, id: string, actor: { id: string; role: string }): Promise<{ run_id: string; state: string }> {
  return (await client.request<{ run_id: string; state: string }>('POST', `/runs/${encodeURIComponent(id)}/resume`, { actor }, {}, ['run_id', 'state'])).body;
}

/**
 * `call` (an abandon or a resume), and when svcd refuses it because the run is abandoned
 * (invalid_state) while `svc run show` has a next line for it (compensations that failed for
 * good), that line added to the refusal: the command that helps there is another one. The
 * refusal itself is svcd's, unchanged (also with --json).
 */
async function withNextOnRefusal<T>(client: SvcHttpClient, id: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const body = err instanceof CliError ? (err.body as { error?: { code?: unknown; details?: { state?: unknown } } } | undefined) : undefined;
    if (!(err instanceof CliError) || body?.error?.code !== 'invalid_state' || body.error.details?.state !== 'abandoned') throw err;
    let next: string | null = null;
    try {
      next = nextForRun(await handleShow(client, id));
    } catch {
      /* the refusal is the answer */
    }
    if (!next) throw err;
    throw new CliError(`${err.message}\n${next}`, err.exitCode, err.body);
  }
}

export interface RetryCompensationsAnswer {
  run_id: string;
  state: string;
  compensations_scheduled: number;
  steps: string[];
}

/**
 * POST /v1/runs/{id}/compensations/retry: the compensations that failed for good run again
 * (docs/design.md "Retrying compensations"). Warns, as abandon does, when the run's remit has
 * expired: the gateway would refuse them all again.
 */
export async function handleRetryCompensations(
  client: SvcHttpClient,
  id: string,
  reason: string | undefined,
  actor: { id: string; role: string },
  warn: (line: string) => void = () => {},
): Promise<RetryCompensationsAnswer> {
  const body: Record<string, unknown> = { actor };
  if (reason !== undefined) body.reason = reason;
  const answer = (await client.request<RetryCompensationsAnswer>('POST', `/runs/${encodeURIComponent(id)}/compensations/retry`, body, {}, ['compensations_scheduled', 'steps'])).body;
  const ended = await expiredRemitOf(client, id);
  if (ended) {
    warn(
      `run ${id}: its remit ${ended.remitId} expired at ${ended.at}, and the gateway refuses every call of the run (remit_expired): the retried compensations fail for good again; undo those writes by hand`,
    );
  }
  return answer;
}

/** What a retry of compensations scheduled, for a person. */
export function retryCompensationsHuman(x: RetryCompensationsAnswer): string {
  return `run ${x.run_id} ${x.state}: ${x.compensations_scheduled} compensation(s) scheduled again (${x.steps.join(', ')}); svc run events ${x.run_id} --follow shows them end`;
}

/**
 * The run's remit when it has expired by this machine's clock, else null (also when the run or
 * the remit cannot be read: the command asking has succeeded). The gateway then refuses every
 * tool call of the run (remit_expired), compensations included, and a remit is never
 * extended: `svc run resume`, `svc approvals approve` and `svc run abandon` say so (time and
 * saga sweeps: an approved run went straight back to quarantine, compensations failed for
 * good, and nothing said why).
 */
export async function expiredRemitOf(client: SvcHttpClient, runId: string, nowMs = Date.now()): Promise<{ remitId: string; at: string } | null> {
  try {
    const run = (await client.request<{ remit_id?: unknown }>('GET', `/runs/${encodeURIComponent(runId)}`)).body;
    if (typeof run?.remit_id !== 'string') return null;
    const remit = (await client.request<{ exp?: unknown }>('GET', `/remits/${encodeURIComponent(run.remit_id)}`)).body;
    if (typeof remit?.exp !== 'number' || remit.exp * 1000 > nowMs) return null;
    return { remitId: run.remit_id, at: new Date(remit.exp * 1000).toISOString() };
  } catch {
    return null;
  }
}

/** The warning of `svc run resume` and `svc approvals approve` for a run whose remit has expired. */
export async function expiredRemitNote(client: SvcHttpClient, runId: string): Promise<string | null> {
  const ended = await expiredRemitOf(client, runId);
  return (
    ended &&
    `run ${runId}'s remit ${ended.remitId} expired at ${ended.at}: the gateway refuses the run's tool calls (remit_expired), ` +
      `so its next tool call quarantines the step again, and a remit is never extended; abandon the run (svc run abandon ${runId}) and start it again with a new remit`
  );
}

// ------------------------------------------------------------------ human output

/**
 * Dollars as the kernel counts them (usage to the nano-dollar): fixed to four decimals, a run
 * failed budget_exhausted at 0.300000001 of 0.3 showed "0.3000 of 0.3000", and 0.00001845 as 0.
 */
function usdText(usd: number): string {
  return Number.isFinite(usd) && Math.abs(usd) < 1e21 ? usd.toFixed(9).replace(/\.?0+$/, '') : String(usd);
}

function spendLine(used: number, budget: number, unit: string, text: (n: number) => string = (n) => n.toFixed(0)): string {
  const pct = budget > 0 ? ` (${Math.round((used / budget) * 100)}%)` : '';
  return `${text(used)} of ${text(budget)} ${unit}${pct}`;
}

function stateOf(r: Run): string {
  return r.state === 'parked' && r.parked_reason ? `parked (${r.parked_reason})` : r.state;
}

/** The `svc run show` screen: the run at a glance. */
export function showHuman(r: Run): string {
  const lines: Array<[string, string]> = [
    ['run', r.run_id],
    ['state', stateOf(r)],
    ['bundle', `${r.bundle.name}@${r.bundle.version} (${r.bundle_id})`],
    ['workflow', r.workflow],
    ['department', r.department],
    ['requested by', `${r.requested_by.id} (role ${r.requested_by.role}, manager ${r.requested_by.manager})`],
    ['remit', r.remit_id],
  ];
  if (r.parent_run_id) lines.push(['parent run', r.parent_run_id]);
  lines.push(['policies', r.policies.length ? r.policies.map((p) => `${p.name}@${p.version}`).join(', ') : '(none)']);
  lines.push(['current step', r.current_step ?? '-']);
  if (r.pending_approval_id) lines.push(['approval', `${r.pending_approval_id} pending`]);
  lines.push(['tokens', spendLine(r.usage.tokens, r.budget.tokens, 'tokens')]);
  lines.push(['usd', spendLine(r.usage.usd, r.budget.usd, 'USD', usdText)]);
  if (r.error) lines.push(['error', clean(`${r.error.code}: ${r.error.message}`)]);
  lines.push(['events', `${r.last_seq}, head ${r.head_hash.slice(0, 16)}…`]);
  const head = lines.map(([k, v]) => `${k.padEnd(14)}${v}`).join('\n');
  const steps = table(
    ['STEP', 'STATE', 'ATTEMPT', 'STARTED', 'ENDED', 'ERROR'],
    Object.entries(r.steps).map(([id, s]) => [id === r.current_step ? `${id} *` : id, s.state, s.attempt, s.started_at ?? '-', s.ended_at ?? '-', s.error ? `${s.error.code}: ${s.error.message}` : '']),
  );
  const out = r.output !== null && r.output !== undefined ? `\noutput\n${terminalJson(r.output)}` : '';
  return `${head}\n\n${steps}${out}`;
}

/**
 * What the on-call does next with a run that waits for someone (svc(1), svc run show): one
 * line on standard error after the screen, none for a run that goes on by itself or has ended
 * for good. Not with --json.
 */
export function nextForRun(r: Pick<Run, 'run_id' | 'state' | 'parked_reason' | 'pending_approval_id'> & Partial<Pick<Run, 'current_step' | 'steps' | 'error'>>): string | null {
  const id = r.run_id;
  const abandon = `svc run abandon ${id} --reason TEXT --actor ID:ROLE`;
  if (r.state === 'failed') return `svc: next: the run will not go on by itself; ${abandon} runs the compensations its completed steps declare`;
  if (r.state === 'abandoned' && r.error?.code === 'compensation_failed') {
    // The steps whose compensation failed show state failed with the compensation's error.
    return `svc: next: ${r.error.message}, so those steps' writes stand; once what the error says is repaired, svc run retry-compensations ${id} --reason TEXT --actor ID:ROLE runs them again, or undo the writes by hand`;
  }
  if (r.state !== 'parked') return null;
  if (r.parked_reason === 'human') {
    const which = r.pending_approval_id ?? 'its approval';
    return `svc: next: an approver decides ${which} (svc approvals list --actor ID:ROLE), or ${abandon}`;
  }
  if (r.parked_reason === 'connector_quarantined') {
    return `svc: next: once the connector is repaired and released (svc gateway canaries, svc gateway release), svc run resume ${id} --actor ID:ROLE; or ${abandon}`;
  }
  // A template the bundle got wrong fails again on every resume: the run keeps its bundle (svc-bundle(5)).
  const code = r.current_step ? r.steps?.[r.current_step]?.error?.code : undefined;
  if (code === 'template_invalid') {
    return `svc: next: the step's template is the bundle's own mistake, and the run keeps its bundle: push it fixed under a new version (svc bundle push), then ${abandon} and start the run again`;
  }
  return `svc: next: fix what the step's error says, then svc run resume ${id} --actor ID:ROLE; or ${abandon}`;
}

function listHuman(page: { runs: Run[]; next: string | null }): string {
  if (page.runs.length === 0) return 'no runs';
  const rows = page.runs.map((r) => [
    r.run_id,
    stateOf(r),
    `${r.bundle.name}@${r.bundle.version}/${r.workflow}`,
    r.department,
    r.current_step ?? '-',
    `${r.usage.tokens}/${r.budget.tokens}`,
    `${r.usage.usd}/${r.budget.usd}`,
    r.created_at,
  ]);
  return table(['RUN', 'STATE', 'WORKFLOW', 'DEPARTMENT', 'STEP', 'TOKENS', 'USD', 'CREATED'], rows);
}

function summarize(payload: Record<string, unknown>): string {
  const p = payload as Record<string, any>;
  const parts: string[] = [];
  for (const key of ['step', 'attempt', 'reason', 'decision', 'rule', 'approval_id', 'tool', 'delay_ms', 'next_attempt']) {
    if (p[key] !== undefined && p[key] !== null && p[key] !== '' && typeof p[key] !== 'object') parts.push(`${key}=${p[key]}`);
  }
  // Step names a kernel event lists (compensation.retry_requested), not run.created's step objects.
  if (Array.isArray(p.steps) && p.steps.length > 0 && p.steps.every((x: unknown) => typeof x === 'string')) parts.push(`steps=${p.steps.join(',')}`);
  if (p.error && typeof p.error === 'object') parts.push(`error=${p.error.code}`);
  if (p.action && typeof p.action === 'object' && p.action.tool) parts.push(`tool=${p.action.tool}`);
  // A redaction note (svc-events(7)): what was redacted and where, never the content.
  if (p.type === 'redaction') parts.push(`redacted ${p.count ?? 1} ${p.class} at ${p.path}`);
  return parts.join(' ');
}

function actorText(a: RunEvent['actor']): string {
  if (a === null || a === undefined) return '-';
  if (typeof a === 'string') return a;
  const o = a as Record<string, unknown>;
  if (typeof o.id === 'string') return typeof o.role === 'string' ? `${o.id}:${o.role}` : o.id;
  // The kernel records a lease's worker as {worker_id}; shown as a worker's own posts are.
  if (typeof o.worker_id === 'string') return `${o.worker_id}:worker`;
  return JSON.stringify(a);
}

/**
 * Columns wide enough that nearly every kernel kind (up to `compensation.completed`) and a usual
 * actor keep two spaces after them; a longer one (`compensation.retry_requested`, rare) gets its two
 * spaces and pushes the line on.
 */
const KIND_COLUMN = 24;
const ACTOR_COLUMN = 18;

export function eventLine(e: RunEvent): string {
  // A value longer than its column still gets two spaces after it, never runs into the next.
  // Cleaned before it is padded, and padded by the columns it takes (an actor id in CJK is two a character).
  const col = (value: string, width: number) => {
    const text = clean(value);
    return columns(text) >= width ? `${text}  ` : pad(text, width);
  };
  // One line an event, whatever a reason or a payload holds (newlines, escape sequences).
  return `${String(e.seq).padStart(4)}  ${clean(e.at)}  ${col(e.kind, KIND_COLUMN)}${col(actorText(e.actor), ACTOR_COLUMN)}${clean(summarize(e.payload))}`.trimEnd();
}

/** The signed head's own check (decisions §7), which `chain valid` also counts. */
function headLine(r: ReplayReport): string {
  const bad = r.chain_errors.filter((e) => e.reason === 'head_mismatch' || e.reason === 'head_signature_invalid');
  if (bad.length) return `signed head     NO (${[...new Set(bad.map((e) => e.reason))].join(', ')})`;
  return `signed head     yes (seq ${r.state?.last_seq ?? r.events})`;
}

export function replayHuman(r: ReplayReport): string {
  const yes = (b: boolean) => (b ? 'yes' : 'NO');
  const lines = [
    `run             ${r.run_id}`,
    `chain valid     ${yes(r.chain_valid)} (${r.events} events)`,
    headLine(r),
    `state matches   ${yes(r.state_matches)}${r.state_differences?.length ? ` (differs in ${r.state_differences.join(', ')})` : ''}`,
    `decisions       ${r.decisions} re-evaluated, ${r.decision_mismatches.length} mismatched`,
  ];
  if (r.replay_error) lines.push(`replay error    ${r.replay_error}`);
  for (const e of r.chain_errors) lines.push(`  seq ${e.seq}: ${e.reason}${e.detail ? ` (${e.detail})` : ''}`);
  for (const m of r.decision_mismatches) {
    const fmt = (v: { decision: string | null; rule: string | null; error?: string }) => (v.error ? `error: ${v.error}` : `${v.decision} ${v.rule}`);
    lines.push(`  seq ${m.seq}: ${m.action_id} recorded ${fmt(m.recorded)}, replayed ${fmt(m.replayed)}`);
  }
  lines.push(replayChecksOut(r) ? 'replay: everything checks out' : 'replay: FAILED');
  return lines.join('\n');
}

/** Where --follow stops: nothing more happens to the run unless someone abandons a failed one. */
const RESTING = new Set(['completed', 'failed', 'abandoned']);

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** svcd away for now: not reachable (exit 3's errors), or draining before a restart (503 unavailable). */
function svcdAway(err: unknown): boolean {
  if (!(err instanceof CliError)) return false;
  const body = err.body as { error?: { code?: unknown } } | undefined;
  return err.exitCode === EXIT.unreachable || body?.error?.code === 'unavailable';
}

/**
 * `call`, asked again while svcd is away (a restart): --follow keeps following, as the inbox
 * and the worker ride a restart out. One line on standard error when it goes, one when it is
 * back; waits grow from the poll interval to 5 s.
 */
async function riding<T>(call: () => Promise<T>, interval: number, url: string): Promise<T> {
  let wait = interval;
  let away = false;
  for (;;) {
    try {
      const answer = await call();
      if (away) process.stderr.write(`svc: svcd at ${url} answers again\n`);
      return answer;
    } catch (err) {
      if (!svcdAway(err)) throw err;
      if (!away) process.stderr.write(`svc: ${(err as Error).message} (still following, asking again)\n`);
      away = true;
      await sleep(wait);
      wait = Math.min(5000, wait * 2);
    }
  }
}

/**
 * `svc run events`: hands `print` the run's events from seq `first`, page by page. With
 * `follow`, asks again every `interval` ms (riding out an svcd restart) until the run rests,
 * then prints what came last and returns.
 */
async function printEvents(client: SvcHttpClient, id: string, o: { first: number; follow: boolean; interval: number }, print: (events: readonly RunEvent[]) => void): Promise<void> {
  let seq = o.first;
  // Only a follow rides out a restart, and only once svcd has answered it: a wrong address,
  // or an svcd not running, fails at once (exit 3), as every command does.
  let answered = false;
  const ask = async <T,>(call: () => Promise<T>): Promise<T> => {
    const answer = await (o.follow && answered ? riding(call, o.interval, client.opts.baseUrl) : call());
    answered = true;
    return answer;
  };
  for (;;) {
    const page = await ask(() => handleEventsPage(client, id, seq));
    print(page.events);
    seq = page.next_seq;
    // A page can stop short of its limit (svcd bounds pages in bytes): read until one is empty.
    if (page.events.length > 0) continue;
    if (!o.follow) return;
    const state = (await ask(() => handleShow(client, id))).state;
    if (RESTING.has(state)) {
      for (;;) {
        const rest = await ask(() => handleEventsPage(client, id, seq));
        print(rest.events);
        if (rest.events.length === 0) return;
        seq = rest.next_seq;
      }
    }
    await sleep(o.interval);
  }
}

export function registerRun(program: Command): void {
  const run = program.command('run').description('start, list and show runs, read or follow their events, replay, abandon and resume them, retry their failed compensations');

  run
    .command('start')
    .description('start a run of a bundle workflow (POST /v1/runs); prints the run id')
    .argument('<bundle>', 'bundle id (bnd_…) or NAME[@VERSION]')
    .argument('<workflow>', 'workflow name')
    .option('--input <json>', 'the input: @FILE, @- for stdin, or inline JSON (default: {})')
    // Checked in the action, after the arguments: commander checks required options first, so
    // `svc run start refunds` named the missing --remit before the missing <workflow>.
    .option('--remit <id>', 'the remit the run uses; it is bound to the run (required)')
    .option('--requested-by <id:role:manager>', "the requester (default: the remit's)")
    .addHelpText(
      'after',
      '\nExample:\n  svc run start refunds refund --remit rmt_01J… \\\n    --input \'{"ticket_id":"T-1","customer_id":"cus_001","invoice_id":"inv_1001","message":"charged twice"}\'',
    )
    .action(async function (this: Command, bundle: string, workflow: string, f: StartFlags) {
      if (f.remit === undefined) throw usageError("required option '--remit <id>' not specified (run with --help for usage)");
      const r = await handleStart(kernelClient(this), bundle, workflow, f, (line) => process.stderr.write(`svc: warning: ${line}\n`));
      if (globals(this).json) output(this, r);
      else {
        process.stdout.write(r.run_id + '\n');
        process.stderr.write(`run ${r.run_id} ${r.state}\n`);
      }
    });

  run
    .command('list')
    .description('list runs, newest first (GET /v1/runs)')
    .addOption(new Option('--state <state>', 'only runs in this state').choices([...RUN_STATES]))
    .option('--department <name>', 'only runs of this department')
    .option('--limit <n>', 'page size, 1-500 (default: 50)')
    .option('--after <cursor>', 'the next cursor of a previous page')
    .action(async function (this: Command, f: ListFlags) {
      const page = await handleList(kernelClient(this), f);
      output(this, page, listHuman);
      const given = this.optsWithGlobals<{ kernelUrl?: string; token?: string }>();
      if (!globals(this).json && page.next) process.stderr.write(`more: ${nextPageCommand(f, page.next, given)}\n`);
    });

  run
    .command('show')
    .description('a run at a glance: state, steps with attempts, usage against budget')
    .argument('<id>', 'run id')
    .action(async function (this: Command, id: string) {
      const r = await handleShow(kernelClient(this), id);
      output(this, r, showHuman);
      const next = globals(this).json ? null : nextForRun(r);
      if (next) process.stderr.write(clean(next) + '\n');
    });

  run
    .command('events')
    .description("print a run's event log (NDJSON with --json); --follow keeps printing new events")
    .argument('<id>', 'run id')
    .option('--from-seq <n>', 'first seq to print (default: 1)')
    .option('--follow', 'keep printing new events until the run is completed, failed or abandoned')
    .option('--interval <ms>', 'poll interval with --follow, at least 50 (default: 1000)')
    .action(async function (this: Command, id: string, f: { fromSeq?: string; follow?: boolean; interval?: string }) {
      const client = kernelClient(this);
      const json = globals(this).json;
      const first = f.fromSeq === undefined ? 1 : wholeOf(f.fromSeq);
      if (first === null || first < 1) throw usageError(`--from-seq must be a positive integer, got "${f.fromSeq}"`);
      const interval = f.interval === undefined ? 1000 : wholeOf(f.interval);
      if (interval === null || interval < 50) throw usageError(`--interval must be an integer of at least 50 ms, got "${f.interval}"`);
      await printEvents(client, id, { first, follow: Boolean(f.follow), interval }, (events) => {
        for (const e of events) process.stdout.write((json ? JSON.stringify({ type: 'event', run_id: id, ...e }) : eventLine(e)) + '\n');
      });
    });

  run
    .command('replay')
    .description('re-check a run: hash chain, signed head, state and policy decisions; exits 1 when anything does not check out')
    .argument('<id>', 'run id')
    .action(async function (this: Command, id: string) {
      const report = await handleReplay(kernelClient(this), id);
      output(this, report, replayHuman);
      if (!replayChecksOut(report)) throw new CliError(`replay of ${id} does not check out`, EXIT.failed);
    });

  run
    .command('abandon')
    .description('abandon a run: compensations of completed steps run last first, then the run is abandoned (who: --actor or SVC_ACTOR, required)')
    .argument('<id>', 'run id')
    .requiredOption('--reason <text>', 'why, recorded in the log (required)')
    .action(async function (this: Command, id: string, f: { reason: string }) {
      // An operator's action: the log names who took it, as it names an approver.
      const client = kernelClient(this);
      const r = await withNextOnRefusal(client, id, () => handleAbandon(client, id, f.reason, actorOf(this), (line) => process.stderr.write(`svc: warning: ${line}\n`)));
      output(this, r, (x: typeof r) => abandonHuman(id, x));
    });

  run
    .command('retry-compensations')
    .description('run again the compensations of an abandoned run that failed for good (compensation_failed), once their cause is repaired (who: --actor or SVC_ACTOR, required)')
    .argument('<id>', 'run id')
    .option('--reason <text>', 'why, recorded in the log (for example what was repaired)')
    .addHelpText(
      'after',
      '\nEach one runs from attempt 1 with its step\'s retry policy; the run is abandoning until they end, then\nabandoned again (with error compensation_failed only if one fails for good again).\nAsked again while they run, it answers the same and records nothing; with nothing to retry it\nexits 1 (invalid_state). See svc(1).\n\nExample:\n  svc run retry-compensations run_01J… --reason "billing upstream repaired" --actor ops-1:ops',
    )
    .action(async function (this: Command, id: string, f: { reason?: string }) {
      if (f.reason === '') throw usageError('--reason must not be empty');
      const r = await handleRetryCompensations(kernelClient(this), id, f.reason, actorOf(this), (line) => process.stderr.write(`svc: warning: ${line}\n`));
      output(this, r, retryCompensationsHuman);
    });

  run
    .command('resume')
    .description('resume a run parked for a human, a quarantined step or a quarantined connector (who: --actor or SVC_ACTOR, required)')
    .argument('<id>', 'run id')
    .action(async function (this: Command, id: string) {
      const client = kernelClient(this);
      const r = await withNextOnRefusal(client, id, () => handleResume(client, id, actorOf(this)));
      output(this, r, (x: typeof r) => `run ${x.run_id} ${x.state}`);
      const note = await expiredRemitNote(client, r.run_id);
      if (note) process.stderr.write(`svc: warning: ${note}\n`);
    });
}

/**
 * The field lists of the man pages are the answers svcd really gives (I 4.1, 4.2, 6; D §7):
 * svcd(8) ENDPOINTS, svc-events(7) payloads and svc-gateway(5) answers, read out of the roff
 * source and compared with what one realistic scenario against a real svcd (kernel and gateway
 * in-process on port 0, the real worker for the model step) produces.
 *
 * How the pages are read (kept small and strict: a list that does not parse fails the test):
 * - an entry is a `.TP` whose next line is the heading (`.B POST /runs/\fIid\fB/replay`,
 *   `.B step.leased`); it runs to the next `.TP`, `.PP`, `.SS` or `.SH`;
 * - a list is a `.B` or `.BR` line whose text starts with `{`;
 * - svcd(8): an endpoint's answer is the LAST list of its entry (a request body comes first);
 *   svc-events(7): a kind's payload is the FIRST list of its entry;
 * - a few lists stand in prose, not under a heading: those are found after an anchor line, which
 *   must occur once in the page;
 * - a field written `name?` is optional: it may be absent, and is present when the page's prose
 *   says so; every other field must be present (its value may be null);
 * - `name: {a, b}` and `name: [{a, b}]` are checked one level down too, when the value is an
 *   object (or a list of objects); any other value (`ok: true`, `{\fIname\fB: ...}`) is opaque.
 * Where a page and an answer disagree, interface.md and decisions.md decide; otherwise the
 * code is right and the page is fixed.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { ALL_EVENT_KINDS, isExternalKind } from '../../src/events/kinds.js';
import { loadGatewayConfig } from '../../src/gateway/config.js';
import { Redactor } from '../../src/log/logger.js';
import { MockProvider } from '../../src/worker/providers/mock.js';
import { Worker } from '../../src/worker/worker.js';
import type { Bundle } from '../../src/types.js';
import { ROOT, tempDir } from '../helpers/daemon.js';
import { request } from '../helpers/http-answer.js';
import { APPROVER, REFUNDS_POLICY, REQUESTER, refundsBundle, sleep, startRunDaemon, type RunDaemon } from './run-fixtures.js';

// ---------------------------------------------------------------------------------------------
// The roff reader
// ---------------------------------------------------------------------------------------------

interface Field {
  name: string;
  optional: boolean;
  /** The fields one level down (`name: {a, b}` or `name: [{a, b}]`); null when opaque. */
  children: Field[] | null;
}

const pageText = (name: string) => readFileSync(join(ROOT, 'man', name), 'utf8');

/** The text a `.B`/`.BR`/`.RB` line sets, fonts dropped; `\fIword` (a placeholder) becomes `{word}`. */
function lineText(line: string): string {
  const m = /^\.(B|BR|RB|BI|IR|I)(?: (.*))?$/.exec(line);
  if (!m) return line;
  // An italic stretch ends at the next font change or at the end of its argument.
  const args = [...(m[2] ?? '').matchAll(/"([^"]*)"|(\S+)/g)].map((a) => (a[1] ?? a[2]!).replace(/\\fI([^\\]*)(\\f[BRP])?/g, '{$1}'));
  const text = m[1] === 'B' || m[1] === 'I' ? args.join(' ') : args.join('');
  return text
    .replace(/\\f[BRP]/g, '')
    .replace(/\\\(dq/g, '"')
    .replace(/\\-/g, '-')
    .replace(/\\e/g, '\\');
}

/** The balanced `{...}` that `text` starts with. */
function braced(text: string, where: string): string {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '{' || text[i] === '[') depth++;
    else if (text[i] === '}' || text[i] === ']') depth--;
    if (depth === 0) return text.slice(0, i + 1);
  }
  throw new Error(`${where}: unbalanced list ${text}`);
}

/** Splits at the commas outside braces and brackets. */
function topLevel(inner: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i];
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === ',' && depth === 0) {
      out.push(inner.slice(start, i).trim());
      start = i + 1;
    }
  }
  out.push(inner.slice(start).trim());
  return out;
}

/** `{a, b?, c: {d, e}, f: [{g}]}` → fields; null when a member is not a field name (strict only at the top). */
function parseList(list: string, where: string, strict = true): Field[] | null {
  if (!list.startsWith('{') || !list.endsWith('}')) {
    if (strict) throw new Error(`${where}: not a {...} list: ${list}`);
    return null;
  }
  const fields: Field[] = [];
  for (const member of topLevel(list.slice(1, -1))) {
    const m = /^"?([a-z_][a-z0-9_]*)"?(\?)?(?:: (.+))?$/.exec(member);
    if (!m) {
      if (strict) throw new Error(`${where}: "${member}" is not a field of ${list}`);
      return null;
    }
    const value = m[3];
    let children: Field[] | null = null;
    if (value?.startsWith('{')) children = parseList(value, where, false);
    else if (value?.startsWith('[{') && value.endsWith('}]')) children = parseList(value.slice(1, -1), where, false);
    fields.push({ name: m[1]!, optional: m[2] === '?', children });
  }
  if (new Set(fields.map((f) => f.name)).size !== fields.length) throw new Error(`${where}: a field repeats in ${list}`);
  return fields;
}

/** The lists of the `.TP` entry headed `heading` (which must head exactly one entry). */
function entryLists(page: string, heading: string): string[] {
  const lines = pageText(page).split('\n');
  const starts = lines.flatMap((l, i) => (l === '.TP' && lines[i + 1] !== undefined && lineText(lines[i + 1]!) === heading ? [i + 2] : []));
  if (starts.length !== 1) throw new Error(`${page}: ${starts.length} entries headed "${heading}"`);
  const lists: string[] = [];
  for (let i = starts[0]!; i < lines.length && !/^\.(TP|PP|SS|SH)\b/.test(lines[i]!); i++) {
    if (!/^\.BR? /.test(lines[i]!)) continue;
    const text = lineText(lines[i]!);
    if (text.startsWith('{')) lists.push(braced(text, `${page} ${heading}`));
  }
  if (lists.length === 0) throw new Error(`${page}: the entry "${heading}" has no {...} list`);
  return lists;
}

/** The first list within three lines after the one line of `page` that reads `anchor`. */
function anchoredList(page: string, anchor: string): string {
  const lines = pageText(page).split('\n');
  const at = lines.flatMap((l, i) => (lineText(l) === anchor ? [i] : []));
  if (at.length !== 1) throw new Error(`${page}: ${at.length} lines read "${anchor}"`);
  for (let i = at[0]! + 1; i <= at[0]! + 3; i++) {
    const text = lineText(lines[i] ?? '');
    if (/^\.BR? /.test(lines[i] ?? '') && text.startsWith('{')) return braced(text, `${page} "${anchor}"`);
  }
  throw new Error(`${page}: no {...} list right after "${anchor}"`);
}

type Locator = { page: string; heading: string; pick: 'first' | 'last' } | { page: string; anchor: string };

function documented(loc: Locator): Field[] {
  if ('anchor' in loc) return parseList(anchoredList(loc.page, loc.anchor), `${loc.page} "${loc.anchor}"`)!;
  const lists = entryLists(loc.page, loc.heading);
  return parseList(loc.pick === 'first' ? lists[0]! : lists[lists.length - 1]!, `${loc.page} ${loc.heading}`)!;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What differs between `value`'s keys and the documented fields, one level down too. */
function differences(value: unknown, fields: Field[], path = ''): string[] {
  if (!isObject(value)) return [`${path || '/'}: not an object: ${JSON.stringify(value)?.slice(0, 200)}`];
  const out: string[] = [];
  const keys = Object.keys(value);
  for (const f of fields) if (!f.optional && !keys.includes(f.name)) out.push(`${path}/${f.name}: documented, not in the answer`);
  for (const k of keys) if (!fields.some((f) => f.name === k)) out.push(`${path}/${k}: in the answer, not documented`);
  for (const f of fields) {
    const v = value[f.name];
    if (!f.children) continue;
    if (isObject(v)) out.push(...differences(v, f.children, `${path}/${f.name}`));
    else if (Array.isArray(v)) v.forEach((e, i) => isObject(e) && out.push(...differences(e, f.children!, `${path}/${f.name}/${i}`)));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The table: what each page documents, and where the scenario records its answers
// ---------------------------------------------------------------------------------------------

const svcd = (heading: string): Locator => ({ page: 'svcd.8', heading, pick: 'last' });
const ev = (heading: string): Locator => ({ page: 'svc-events.7', heading, pick: 'first' });

/**
 * Kernel endpoints (svcd(8) ENDPOINTS; I 4.1) and the gateway's answers (svc-gateway(5); I 4.2).
 * `key`: where the scenario records the answers; `from`: the entries of a list member of those
 * answers are compared instead.
 */
const ENDPOINTS: Array<{ key: string; loc: Locator; from?: { key: string; member: string } }> = [
  { key: 'POST /remits', loc: svcd('POST /remits') },
  { key: 'POST /remits/{id}/derive', loc: svcd('POST /remits/{id}/derive') },
  { key: 'GET /remits/{id}', loc: svcd('GET /remits/{id}') },
  { key: 'POST /runs', loc: svcd('POST /runs') },
  { key: 'GET /runs', loc: svcd('GET /runs') },
  { key: 'GET /runs/{id}', loc: svcd('GET /runs/{id}') },
  // "each entry is the run state object"
  { key: 'GET /runs (entries)', loc: svcd('GET /runs/{id}'), from: { key: 'GET /runs', member: 'runs' } },
  { key: 'GET /runs/{id}/events', loc: svcd('GET /runs/{id}/events') },
  { key: 'GET /runs/{id}/events (entries)', loc: { page: 'svc-events.7', anchor: 'Each event is' }, from: { key: 'GET /runs/{id}/events', member: 'events' } },
  { key: 'POST /runs/{id}/events', loc: svcd('POST /runs/{id}/events') },
  { key: 'POST /runs/{id}/replay', loc: svcd('POST /runs/{id}/replay') },
  { key: 'POST /runs/{id}/replay', loc: { page: 'svc-events.7', anchor: 'answers' } },
  { key: 'POST /runs/{id}/abandon', loc: svcd('POST /runs/{id}/abandon') },
  { key: 'POST /runs/{id}/resume', loc: svcd('POST /runs/{id}/resume') },
  { key: 'POST /runs/{id}/compensations/retry', loc: svcd('POST /runs/{id}/compensations/retry') },
  { key: 'POST /leases', loc: svcd('POST /leases') },
  { key: 'POST /leases/{id}/heartbeat', loc: svcd('POST /leases/{id}/heartbeat') },
  { key: 'POST /leases/{id}/complete', loc: svcd('POST /leases/{id}/complete') },
  { key: 'POST /leases/{id}/fail', loc: svcd('POST /leases/{id}/fail') },
  { key: 'POST /leases/{id}/actions', loc: svcd('POST /leases/{id}/actions') },
  { key: 'GET /approvals', loc: svcd('GET /approvals') },
  // each entry of the list is the approval object
  { key: 'GET /approvals (entries)', loc: svcd('GET /approvals/{id}'), from: { key: 'GET /approvals', member: 'approvals' } },
  { key: 'GET /approvals/{id}', loc: svcd('GET /approvals/{id}') },
  { key: 'POST /approvals/{id}', loc: svcd('POST /approvals/{id}') },
  { key: 'POST /bundles', loc: svcd('POST /bundles') },
  { key: 'GET /bundles', loc: svcd('GET /bundles') },
  { key: 'GET /bundles/{id}', loc: svcd('GET /bundles/{id}') },
  { key: 'POST /policies', loc: svcd('POST /policies') },
  { key: 'GET /policies', loc: svcd('GET /policies') },
  { key: 'GET /policies/{name}', loc: svcd('GET /policies/{name}, GET /policies/{name}/{version}') },
  { key: 'POST /policies/test', loc: svcd('POST /policies/test') },
  { key: 'GET /health', loc: svcd('GET /health') },
  { key: 'GET /keys', loc: svcd('GET /keys') },
  { key: 'kernel error', loc: { page: 'svcd.8', anchor: 'bodies, is answered with the envelope' } },
  // Gateway (svc-gateway(5); I 4.2)
  { key: 'GATEWAY GET /health', loc: { page: 'svc-gateway.5', heading: 'GET /v1/health', pick: 'first' } },
  { key: 'GATEWAY GET /tools (entries)', loc: { page: 'svc-gateway.5', anchor: 'An array of tool descriptors' } },
  { key: 'GATEWAY POST /tools/call', loc: { page: 'svc-gateway.5', anchor: 'Success is' } },
  { key: 'GATEWAY refusal', loc: { page: 'svc-gateway.5', anchor: 'Refusals are 403' } },
  { key: 'GATEWAY canary', loc: { page: 'svc-gateway.5', anchor: 'is a map by connector name of' } },
];

// Not covered: GET /metrics of both listeners (Prometheus text, not JSON), the gateway's
// POST /v1/test/shape (test tools only), and the members of a lease's `context` (I 2.6; the
// page gives no list for them).

// ---------------------------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------------------------

let d: RunDaemon;
let gwDir: string;
const answers = new Map<string, unknown[]>();
const runIds: string[] = [];
const events = new Map<string, Array<{ run: string; seq: number; payload: unknown }>>();

function record(key: string, body: unknown): void {
  if (!answers.has(key)) answers.set(key, []);
  answers.get(key)!.push(body);
}

/** A kernel request (GET without a body, but replay) whose answer is recorded under `key`; any status but `expectStatus` (else a 2xx) throws. */
async function k(key: string | null, path: string, body?: unknown, headers: Record<string, string> = {}, expectStatus?: number): Promise<any> {
  const res = await request(d.kernelUrl!, path, { body, headers, method: body === undefined && !/replay$/.test(path) ? 'GET' : 'POST' });
  if (expectStatus !== undefined ? res.status !== expectStatus : res.status >= 300 && res.status !== 204) {
    throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
  }
  if (key && res.status !== 204) record(key, res.body);
  return res.body;
}

async function g(key: string | null, method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${d.gatewayUrl}/v1${path}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const answer = { status: res.status, body: (await res.json()) as any };
  if (key) record(key, answer.body);
  return answer;
}

/** The worker id of the leases and events of the test itself (not svc's worker). */
const TEST_WORKER = 'w-doc';

const lease = (kinds: string[], extra: Record<string, unknown> = {}) => k('POST /leases', '/leases', { worker_id: TEST_WORKER, kinds, ...extra });

async function remit(over: Record<string, unknown> = {}): Promise<{ remit_id: string; token: string }> {
  return k('POST /remits', '/remits', {
    tools: ['billing.*', 'test.*'],
    scopes: ['test:*'],
    grants: [],
    spend: { tokens: 100_000, usd: 5 },
    autonomy: 'supervised',
    ttl_seconds: 600,
    policy_set: ['refunds'],
    requested_by: REQUESTER,
    ...over,
  });
}

async function run(bundleId: string, workflow: string, input: unknown, over: Record<string, unknown> = {}): Promise<{ run_id: string; remit_id: string; token: string }> {
  const r = await remit(over);
  const created = await k('POST /runs', '/runs', { bundle_id: bundleId, workflow, input, remit_id: r.remit_id, requested_by: REQUESTER });
  runIds.push(created.run_id);
  return { run_id: created.run_id, ...r };
}

async function pushBundle(bundle: Bundle): Promise<string> {
  return (await k('POST /bundles', '/bundles', { bundle, signature: signBundle(bundle, d.publisher) })).bundle_id;
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function eventsOf(runId: string): Promise<any[]> {
  return (await k(null, `/runs/${runId}/events?limit=1000`)).events;
}

/** Two tool steps with compensations, then a third (D §6 abandon). */
function sagaBundle(): Bundle {
  return {
    name: 'doc-saga',
    version: '1.0.0',
    department: 'ops',
    tools: { 'test.echo': { writes: false } },
    workflows: {
      go: {
        input_schema: { type: 'object' },
        steps: [
          { id: 'a', kind: 'tool', tool: 'test.echo', args: { n: 1 }, compensate: { tool: 'test.echo', args: { undo: '{{steps.a.output.id}}' } } },
          { id: 'b', kind: 'tool', tool: 'test.echo', args: { n: 2 }, compensate: { tool: 'test.echo', args: { undo: '{{steps.b.output.id}}' } } },
          { id: 'c', kind: 'tool', tool: 'test.echo', args: { n: 3 } },
        ],
      },
    },
  } as unknown as Bundle;
}

async function scenario(): Promise<void> {
  await k('POST /policies', '/policies', { name: 'refunds', version: '1', source: REFUNDS_POLICY });
  await k('GET /policies', '/policies');
  await k('GET /policies/{name}', '/policies/refunds');
  await k('GET /policies/{name}', '/policies/refunds/1');
  // The model answers an amount that needs finance's approval (D 5.1).
  const refunds = refundsBundle({ version: '2.0.0', mock: { triage: { output: { category: 'refund', amount: 150 } } } });
  refunds.workflows.refund!.steps[0]!.tools = [];
  const refundsId = await pushBundle(refunds);
  await k('GET /bundles', '/bundles');
  await k('GET /bundles/{id}', `/bundles/${refundsId}`);

  // 1. The main run: the real worker runs the model step (model.called, note for the e-mail
  // address the prompt shows), then the test drives lookup (gateway calls) and the action.
  const main = await run(refundsId, 'refund', { invoice_id: 'inv-1', ticket: 'refund me: dana.whitfield@example.com, +1 415 555 0100' });
  const worker = new Worker({ kernelUrl: d.kernelUrl!, gatewayUrl: d.gatewayUrl!, provider: new MockProvider(), waitSeconds: 1, workerId: 'w-model', kinds: ['model'] });
  worker.start();
  try {
    await until('the model step', async () => ((await eventsOf(main.run_id)).some((e) => e.kind === 'step.completed') ? true : undefined));
  } finally {
    await worker.stop({ graceMs: 0 });
  }
  const lookup = await lease(['tool']);
  if (lookup.run_id !== main.run_id) throw new Error('leased another run');
  await k('POST /leases/{id}/heartbeat', `/leases/${lookup.lease_id}/heartbeat`, {});
  const call = { remit_token: lookup.context.remit_token, run_id: main.run_id, step: 'lookup', lease_id: lookup.lease_id };
  const ok = await g('GATEWAY POST /tools/call', 'POST', '/tools/call', { ...call, tool: 'test.echo', args: { invoice_id: 'inv-1' }, idempotency_key: 'doc-1' });
  if (ok.status !== 200) throw new Error(`tools/call: ${ok.status} ${JSON.stringify(ok.body)}`);
  const refused = await g('GATEWAY refusal', 'POST', '/tools/call', { ...call, tool: 'test.echo', args: {}, scope: 'sql:table:x' });
  if (refused.status !== 403) throw new Error(`expected a refusal: ${refused.status} ${JSON.stringify(refused.body)}`);
  await k('POST /runs/{id}/events', `/runs/${main.run_id}/events`, { kind: 'note', payload: { text: 'looked up' }, actor: { id: TEST_WORKER, role: 'worker' } }, { 'x-svc-lease': lookup.lease_id });
  await k('POST /leases/{id}/complete', `/leases/${lookup.lease_id}/complete`, { output: { rows: [] }, usage: { tokens: 1, usd: 0 } });
  const act = await lease(['action']);
  await k('POST /leases/{id}/actions', `/leases/${act.lease_id}/actions`, { action: { tool: 'billing.refund', args: act.step_def.args, summary: 'refund 150' } });
  await k('GET /approvals', `/approvals?run_id=${main.run_id}`);
  const approvalId = (await k(null, `/runs/${main.run_id}`)).pending_approval_id as string;
  await k('GET /approvals/{id}', `/approvals/${approvalId}`);
  await k('POST /approvals/{id}', `/approvals/${approvalId}`, { decision: 'approved', actor: APPROVER, reason: 'checked' });
  await k('GET /approvals/{id}', `/approvals/${approvalId}`);
  await k('GET /approvals', `/approvals?run_id=${main.run_id}`);
  const again = await lease(['action']);
  const allowed = await k('POST /leases/{id}/actions', `/leases/${again.lease_id}/actions`, { action: { tool: 'billing.refund', args: again.step_def.args, summary: 'refund 150' } });
  if (allowed.decision !== 'allow') throw new Error(`expected allow: ${JSON.stringify(allowed)}`);
  await k('POST /leases/{id}/complete', `/leases/${again.lease_id}/complete`, { output: { id: 'rf-1' }, usage: { tokens: 1, usd: 0 } });
  await k('GET /runs/{id}', `/runs/${main.run_id}`);
  await k('POST /runs/{id}/replay', `/runs/${main.run_id}/replay`);

  // What-if over the decided action (D 5.3), the corpus taken from the log.
  const decided = (await eventsOf(main.run_id)).find((e) => e.kind === 'action.decided')!.payload;
  await k('POST /policies', '/policies', { name: 'refunds', version: '2', source: REFUNDS_POLICY.replace('> 100', '> 1000').replace('<= 100', '<= 1000') });
  await k('POST /policies/test', '/policies/test', { policy_a: { name: 'refunds', version: '1' }, policy_b: { name: 'refunds', version: '2' }, corpus: [{ action: decided.action, run: decided.run }] });

  // 2. Retry, quarantine, resume, a lease that runs out, then abandon without compensations.
  const second = await run(refundsId, 'refund', { invoice_id: 'inv-2' });
  const t1 = await lease(['model']);
  await k('POST /leases/{id}/fail', `/leases/${t1.lease_id}/fail`, { error: { code: 'flaky', message: 'try again' }, deterministic: false, usage: { tokens: 0, usd: 0 } });
  const t2 = await until('the retry', async () => {
    const l = await lease(['model'], { wait_seconds: 2 });
    return l ?? undefined;
  });
  await k('POST /leases/{id}/fail', `/leases/${t2.lease_id}/fail`, { error: { code: 'broken', message: 'never' }, deterministic: true, usage: { tokens: 0, usd: 0 } });
  await k('POST /runs/{id}/resume', `/runs/${second.run_id}/resume`, { actor: { id: 'ops-1', role: 'ops' } });
  await lease(['model'], { ttl_seconds: 1 });
  await until('the lease to expire', async () => ((await eventsOf(second.run_id)).some((e) => e.kind === 'lease.expired') ? true : undefined));
  await k('POST /runs/{id}/abandon', `/runs/${second.run_id}/abandon`, { reason: 'enough', actor: { id: 'ops-1', role: 'ops' } });

  // 3. Over budget: the run fails (D §8).
  await run(refundsId, 'refund', { invoice_id: 'inv-3' }, { spend: { tokens: 10, usd: 1 } });
  const p1 = await lease(['model']);
  await k('POST /leases/{id}/complete', `/leases/${p1.lease_id}/complete`, { output: { amount: 5 }, usage: { tokens: 1000, usd: 0 } });

  // 4. Abandon with two compensations: one completes, one fails for good (D §6), then is retried.
  const sagaId = await pushBundle(sagaBundle());
  const saga = await run(sagaId, 'go', {}, { policy_set: [] });
  for (const id of ['A1', 'B1']) {
    const l = await lease(['tool']);
    await k('POST /leases/{id}/complete', `/leases/${l.lease_id}/complete`, { output: { id }, usage: { tokens: 1, usd: 0 } });
  }
  await k('POST /runs/{id}/abandon', `/runs/${saga.run_id}/abandon`, { reason: 'customer cancelled', actor: { id: 'ops-1', role: 'ops' } });
  const c1 = await lease(['compensation']);
  await k('POST /leases/{id}/complete', `/leases/${c1.lease_id}/complete`, { output: {}, usage: { tokens: 0, usd: 0 } });
  const c2 = await lease(['compensation']);
  await k('POST /leases/{id}/fail', `/leases/${c2.lease_id}/fail`, { error: { code: 'gone', message: 'cannot undo' }, deterministic: true, usage: { tokens: 0, usd: 0 } });
  // The operator retries the given-up compensation, which completes (docs/design.md "Retrying compensations").
  await k('POST /runs/{id}/compensations/retry', `/runs/${saga.run_id}/compensations/retry`, { reason: 'upstream repaired', actor: { id: 'ops-1', role: 'ops' } }, {}, 202);
  const c3 = await lease(['compensation']);
  await k('POST /leases/{id}/complete', `/leases/${c3.lease_id}/complete`, { output: {}, usage: { tokens: 0, usd: 0 } });

  // 5. Abandon in the middle of a write: the allowed action and a gateway write of the step
  // no compensation undoes, and model usage no lease reported (the optional members).
  const mid = await run(refundsId, 'refund', { invoice_id: 'inv-5' });
  const m1 = await lease(['model']);
  await k('POST /leases/{id}/complete', `/leases/${m1.lease_id}/complete`, { output: { amount: 50 }, usage: { tokens: 1, usd: 0 } });
  const m2 = await lease(['tool']);
  await k('POST /leases/{id}/complete', `/leases/${m2.lease_id}/complete`, { output: { rows: [] }, usage: { tokens: 1, usd: 0 } });
  const m3 = await lease(['action']);
  const small = await k('POST /leases/{id}/actions', `/leases/${m3.lease_id}/actions`, { action: { tool: 'billing.refund', args: m3.step_def.args, summary: 'refund 50' } });
  if (small.decision !== 'allow') throw new Error(`expected allow: ${JSON.stringify(small)}`);
  const write = await g('GATEWAY POST /tools/call', 'POST', '/tools/call', { remit_token: m3.context.remit_token, run_id: mid.run_id, step: 'refund', lease_id: m3.lease_id, tool: 'test.write', args: { n: 1 }, idempotency_key: 'doc-5' });
  if (write.status !== 200) throw new Error(`tools/call: ${write.status} ${JSON.stringify(write.body)}`);
  await k('POST /runs/{id}/events', `/runs/${mid.run_id}/events`, { kind: 'model.called', payload: { source: 'worker', step: 'refund', call_index: 0, segment: 0, usage: { tokens: 7, usd: 0.01 } }, actor: { worker_id: TEST_WORKER } }, { 'x-svc-remit': mid.token });
  await k('POST /runs/{id}/abandon', `/runs/${mid.run_id}/abandon`, { reason: 'wrong invoice', actor: { id: 'ops-1', role: 'ops' } });
  const abandoned = (await eventsOf(mid.run_id)).find((e) => e.kind === 'run.abandon_requested')!.payload;
  if (!abandoned.unreported_usage || !abandoned.uncompensated_writes) throw new Error(`expected the optional members: ${JSON.stringify(abandoned)}`);

  // 6. A derived remit (D 8.3), the run list, the gateway's other answers, an error.
  const parent = await remit();
  const child = await k('POST /remits/{id}/derive', `/remits/${parent.remit_id}/derive`, { autonomy: 'propose' });
  await k('GET /remits/{id}', `/remits/${parent.remit_id}`);
  await k('GET /remits/{id}', `/remits/${child.remit_id}`);
  await k('GET /remits/{id}', `/remits/${main.remit_id}`);
  await k('GET /health', '/health');
  await k('GET /keys', '/keys');
  await k('GET /runs', '/runs?limit=500');
  for (const id of runIds) await k('GET /runs/{id}/events', `/runs/${id}/events?limit=1000`);
  await k('kernel error', '/runs/run_nope', undefined, {}, 404);
  await g('GATEWAY GET /health', 'GET', '/health');
  for (const t of (await g(null, 'GET', '/tools')).body) record('GATEWAY GET /tools (entries)', t);
  for (const c of Object.values((await g(null, 'GET', '/canaries')).body)) record('GATEWAY canary', c);
  await g('GATEWAY canary', 'POST', '/canaries/test/probe');
  await g('GATEWAY canary', 'POST', '/canaries/test/release');

  for (const id of runIds) {
    for (const e of await eventsOf(id)) {
      if (!events.has(e.kind)) events.set(e.kind, []);
      // The external events this test posts itself are free-form; svc's own gateway and worker post the documented shapes.
      if (isExternalKind(e.kind) && (e.actor?.worker_id === TEST_WORKER || e.actor?.id === TEST_WORKER)) continue;
      events.get(e.kind)!.push({ run: id, seq: e.seq, payload: e.payload });
    }
  }
}

beforeAll(async () => {
  gwDir = tempDir('svc-doc-fields-');
  const config = loadGatewayConfig({ data_dir: join(gwDir, 'gw') }, { env: { SVC_GATEWAY_TEST_TOOLS: '1' }, redactor: new Redactor() });
  d = await startRunDaemon({}, null, { gateway: { config, listen: '127.0.0.1:0', canaryLoop: false } });
  await scenario();
}, 60_000);

afterAll(async () => {
  await d?.[Symbol.asyncDispose]();
  rmSync(gwDir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

describe('the roff reader', () => {
  it('reads optional fields, nested lists and placeholders, and refuses what is not a list', () => {
    expect(parseList('{a, b?, c: {d, e}, f: [{g}], h: true, i: {{name}: x | y}}', 't')).toEqual([
      { name: 'a', optional: false, children: null },
      { name: 'b', optional: true, children: null },
      { name: 'c', optional: false, children: [{ name: 'd', optional: false, children: null }, { name: 'e', optional: false, children: null }] },
      { name: 'f', optional: false, children: [{ name: 'g', optional: false, children: null }] },
      { name: 'h', optional: false, children: null },
      { name: 'i', optional: false, children: null },
    ]);
    expect(() => parseList('{a, b c}', 't')).toThrow(/not a field/);
    expect(() => parseList('{a, a}', 't')).toThrow(/repeats/);
    expect(lineText('.BR "GET /policies/\\fIname" ", " "GET /policies/\\fIname\\fB/\\fIversion"')).toBe('GET /policies/{name}, GET /policies/{name}/{version}');
    expect(differences({ a: 1, c: { d: 1, x: 2 }, z: 0 }, parseList('{a, b?, c: {d, e}}', 't')!)).toEqual(['/z: in the answer, not documented', '/c/e: documented, not in the answer', '/c/x: in the answer, not documented']);
  });
});

describe('svcd(8) and svc-gateway(5): each answer has the fields its page lists (I 4.1, 4.2)', () => {
  it.each(ENDPOINTS.map((e) => [e.key, e] as const))('%s', (_key, e) => {
    const fields = documented(e.loc);
    const values = e.from ? (answers.get(e.from.key) ?? []).flatMap((a) => (a as Record<string, unknown[]>)[e.from!.member] ?? []) : answers.get(e.key) ?? [];
    expect(values.length, `the scenario produced no answer for ${e.key}`).toBeGreaterThan(0);
    const problems = [...new Set(values.flatMap((v) => differences(v, fields)))];
    expect(problems, `${e.key} against ${JSON.stringify(e.loc)}`).toEqual([]);
  });
});

describe('svc-events(7): each event kind\'s payload has the fields the page lists (D §7)', () => {
  it.each(ALL_EVENT_KINDS.map((kind) => [kind]))('%s', (kind) => {
    const fields = documented(ev(kind));
    const seen = events.get(kind) ?? [];
    expect(seen.length, `the scenario produced no ${kind} event`).toBeGreaterThan(0);
    const problems = [...new Set(seen.flatMap((e) => differences(e.payload, fields)))];
    expect(problems, `${kind} against svc-events(7)`).toEqual([]);
  });
});

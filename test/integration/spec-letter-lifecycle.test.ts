/**
 * The letter of the run lifecycle in interface.md (I 3, 4.1, 5.1) and decisions.md (D §4, §5.2,
 * §6, §7, §8, §10), black-box against the built svcd over HTTP: completion, abandon and its
 * compensations, budget, lease expiry and long-poll, templates, policy pinning and the
 * default rule, and the bearer token. One daemon (plus one with a token) for the file.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import type { Bundle } from '../../src/types.js';
import { spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
import { expectError, request, type Answer } from '../helpers/http-answer.js';
import { APPROVER, REFUNDS_POLICY, REQUESTER, refundsBundle } from './run-fixtures.js';

let svcd: SpawnedSvcd;
const publisher = generatePublisherKey();

beforeAll(async () => {
  const dir = tempDir('svc-spec-life-');
  svcd = await spawnSvcd(['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--no-gateway', '--publisher', `${publisher.key_id}:${publisher.public_key}`], { SVC_TOKEN: '' });
}, 30_000);

afterAll(async () => {
  await svcd?.stop();
});

const k = (path: string, body?: unknown, headers: Record<string, string> = {}, base: string | null = svcd.kernelUrl): Promise<Answer> => request(base!, path, { body, headers });

/** Three tool steps; a and b declare compensations that read their own output. */
function sagaBundle(): Bundle {
  return {
    name: 'saga',
    version: '1.0.0',
    department: 'ops',
    tools: { 'test.echo': { writes: false } },
    workflows: {
      go: {
        input_schema: { type: 'object', properties: { n: { type: 'number' } } },
        steps: [
          { id: 'a', kind: 'tool', tool: 'test.echo', args: { n: '{{input.n}}', label: 'n={{input.n}}' }, compensate: { tool: 'test.echo', args: { undo: '{{steps.a.output.id}}' } } },
          { id: 'b', kind: 'tool', tool: 'test.echo', args: { from_a: '{{steps.a.output.id}}' }, compensate: { tool: 'test.echo', args: { undo: '{{steps.b.output.id}}' } } },
          { id: 'c', kind: 'tool', tool: 'test.echo', args: { missing: '{{steps.b.output.nothing.deeper}}' } },
        ],
      },
    },
  } as unknown as Bundle;
}

async function push(bundle: Bundle): Promise<string> {
  const res = await k('/bundles', { bundle, signature: signBundle(bundle, publisher) });
  expect([200, 201]).toContain(res.status);
  return res.body.bundle_id;
}

async function startRun(bundleId: string, workflow: string, input: unknown, over: Record<string, unknown> = {}): Promise<{ run_id: string }> {
  const remit = await k('/remits', { tools: ['test.*', 'billing.*', 'crm.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1000, usd: 5 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: REQUESTER, ...over });
  expect(remit.status).toBe(201);
  const run = await k('/runs', { bundle_id: bundleId, workflow, input, remit_id: remit.body.remit_id, requested_by: REQUESTER });
  expect(run.status).toBe(201);
  return run.body;
}

const takeLease = (kinds: string[], extra: Record<string, unknown> = {}) => k('/leases', { worker_id: 'w-life', kinds, ...extra });
const complete = (leaseId: string, output: unknown, usage = { tokens: 1, usd: 0 }) => k(`/leases/${leaseId}/complete`, { output, usage });

/** Ends every ready step earlier tests left, so each test leases its own. */
async function drainReady(): Promise<void> {
  for (;;) {
    const l = await takeLease(['model', 'tool', 'action', 'compensation'], { ttl_seconds: 1 });
    if (l.status === 204) return;
    await k(`/leases/${l.body.lease_id}/fail`, { error: { code: 'drain', message: 'drain' }, deterministic: true });
  }
}

async function events(runId: string): Promise<any[]> {
  return (await k(`/runs/${runId}/events?limit=1000`)).body.events;
}

let saga: string;
let refunds: string;

describe('D §4 templates; D §6 completion, abandon and compensations', () => {
  it('step args render raw values for a lone template and JSON text inside a string; a render error is a deterministic failure (run parked quarantine)', async () => {
    saga = await push(sagaBundle());
    await drainReady();
    const { run_id } = await startRun(saga, 'go', { n: 7 });
    const a = await takeLease(['tool']);
    expect(a.body.step_def.args).toEqual({ n: 7, label: 'n=7' });
    expect((await complete(a.body.lease_id, { id: 'A1' })).body).toEqual({ run_state: 'running', next_step: 'b' });
    const b = await takeLease(['tool']);
    expect(b.body.step_def.args).toEqual({ from_a: 'A1' });
    expect(b.body.context.steps).toEqual({ a: { output: { id: 'A1' } } });
    expect((await complete(b.body.lease_id, { id: 'B1' })).body).toEqual({ run_state: 'running', next_step: 'c' });
    // c's template reads a path b's output does not have.
    const c = await takeLease(['tool']);
    expect(c.status).toBe(204);
    const run = (await k(`/runs/${run_id}`)).body;
    expect(run).toMatchObject({ state: 'parked', parked_reason: 'quarantine' });
    expect(run.steps.c.state).toBe('quarantined');
  });

  it('abandon schedules compensations of completed steps in reverse order as compensation leases; abandoning until they end, then abandoned', async () => {
    await drainReady();
    const { run_id } = await startRun(saga, 'go', { n: 1 });
    for (const id of ['A2', 'B2']) {
      const l = await takeLease(['tool']);
      await complete(l.body.lease_id, { id });
    }
    const ab = await k(`/runs/${run_id}/abandon`, { reason: 'stop', actor: APPROVER });
    expect(ab.status).toBe(202);
    expect(ab.body).toMatchObject({ compensations_scheduled: 2 });
    expect((await k(`/runs/${run_id}`)).body.state).toBe('abandoning');
    expect((await takeLease(['tool'])).status).toBe(204);
    const first = await takeLease(['compensation']);
    expect(first.status).toBe(200);
    expect(first.body.step).toBe('b');
    expect(first.body.step_def).toMatchObject({ tool: 'test.echo', args: { undo: 'B2' } });
    await complete(first.body.lease_id, {});
    expect((await k(`/runs/${run_id}`)).body.state).toBe('abandoning');
    const second = await takeLease(['compensation']);
    expect(second.body.step).toBe('a');
    expect(second.body.step_def.args).toEqual({ undo: 'A2' });
    await complete(second.body.lease_id, {});
    const run = (await k(`/runs/${run_id}`)).body;
    expect(run.state).toBe('abandoned');
    expect(run.steps.a.state).toBe('compensated');
    const kinds = (await events(run_id)).map((e) => e.kind);
    expect(kinds).toEqual(expect.arrayContaining(['run.abandon_requested', 'compensation.completed', 'run.abandoned']));
    expect(kinds.indexOf('run.abandoned')).toBe(kinds.length - 1);
  });

  it('the last step completes the run with its output; abandon of a completed or abandoned run is 409 invalid_state', async () => {
    refunds = await push(refundsBundle());
    await drainReady();
    const { run_id } = await startRun(refunds, 'refund', { invoice_id: 'i' }, { autonomy: 'autonomous' });
    await complete((await takeLease(['model'])).body.lease_id, { amount: 5 });
    await complete((await takeLease(['tool'])).body.lease_id, { rows: [] });
    const last = await complete((await takeLease(['action'])).body.lease_id, { id: 'r1' });
    expect(last.body).toEqual({ run_state: 'completed', next_step: null });
    const run = (await k(`/runs/${run_id}`)).body;
    expect(run).toMatchObject({ state: 'completed', output: { id: 'r1' } });
    expectError(await k(`/runs/${run_id}/abandon`, { reason: 'late', actor: APPROVER }), 409, 'invalid_state');
    const other = await startRun(refunds, 'refund', { invoice_id: 'i' });
    await k(`/runs/${other.run_id}/abandon`, { reason: 'x', actor: APPROVER });
    expectError(await k(`/runs/${other.run_id}/abandon`, { reason: 'again', actor: APPROVER }), 409, 'invalid_state');
  });
});

describe('D §8 spend', () => {
  it('usage beyond spend fails the run with error.code budget_exhausted and a budget.exceeded event; a failed run can still be abandoned (D §6)', async () => {
    await drainReady();
    const { run_id } = await startRun(refunds, 'refund', { invoice_id: 'i' }, { spend: { tokens: 10, usd: 5 } });
    const l = await takeLease(['model']);
    expect(l.body.context.budget).toEqual({ tokens: 10, usd: 5, used_tokens: 0, used_usd: 0 });
    const done = await complete(l.body.lease_id, { amount: 1 }, { tokens: 11, usd: 0 });
    expect(done.status).toBe(200);
    expect(done.body.run_state).toBe('failed');
    const run = (await k(`/runs/${run_id}`)).body;
    expect(run).toMatchObject({ state: 'failed', error: { code: 'budget_exhausted' }, usage: { tokens: 11 } });
    expect((await events(run_id)).map((e) => e.kind)).toContain('budget.exceeded');
    expect((await takeLease(['tool'])).status).toBe(204);
    const ab = await k(`/runs/${run_id}/abandon`, { reason: 'over budget', actor: APPROVER });
    expect(ab.status).toBe(202);
  });
});

describe('D §4 department override; D §8 usage on fail and svc_usage_usd_total{department}', () => {
  it('a workflow department overrides the bundle one: run.department, the list filter and the lease context follow it', async () => {
    const bundle = sagaBundle();
    bundle.version = '1.1.0';
    (bundle.workflows as any).other = { ...(bundle.workflows as any).go, department: 'finance-ops' };
    const id = await push(bundle);
    await drainReady();
    const { run_id } = await startRun(id, 'other', { n: 1 });
    expect((await k(`/runs/${run_id}`)).body.department).toBe('finance-ops');
    const listed = (await k('/runs?department=finance-ops')).body.runs.map((r: any) => r.run_id);
    expect(listed).toEqual([run_id]);
    const l = await takeLease(['tool']);
    expect(l.body.context.run.department).toBe('finance-ops');
    await k(`/leases/${l.body.lease_id}/fail`, { error: { code: 'x', message: 'x' }, deterministic: true });
  });

  it('usage reported with a failure is added to the run and counted by department', async () => {
    await drainReady();
    const usd = async () => Number(/^svc_usage_usd_total\{department="ops"\} ([0-9.e-]+)/m.exec((await k('/metrics')).text)?.[1] ?? 0);
    const before = await usd();
    const { run_id } = await startRun(saga, 'go', { n: 1 });
    const l = await takeLease(['tool']);
    const f = await k(`/leases/${l.body.lease_id}/fail`, { error: { code: 'flaky', message: 'x' }, deterministic: false, usage: { tokens: 7, usd: 0.25 } });
    expect(f.status).toBe(200);
    expect((await k(`/runs/${run_id}`)).body.usage).toEqual({ tokens: 7, usd: 0.25 });
    expect(await usd()).toBeCloseTo(before + 0.25, 9);
    await k(`/runs/${run_id}/abandon`, { reason: 'done', actor: APPROVER });
  });
});

describe('D §6 leases: expiry and long-poll', () => {
  it('an expired lease makes the step ready with attempt + 1, counts svc_leases_expired_total, and its heartbeat is 410', async () => {
    await drainReady();
    const count = async () => Number(/^svc_leases_expired_total (\d+)/m.exec((await k('/metrics')).text)?.[1] ?? NaN);
    const before = await count();
    const { run_id } = await startRun(refunds, 'refund', { invoice_id: 'i' });
    const l = await takeLease(['model'], { ttl_seconds: 1 });
    expect(l.body.attempt).toBe(1);
    await new Promise((r) => setTimeout(r, 1_300));
    expectError(await k(`/leases/${l.body.lease_id}/heartbeat`, {}), 410, 'lease_expired');
    const again = await takeLease(['model']);
    expect(again.body).toMatchObject({ run_id, step: 'triage', attempt: 2 });
    expect(await count()).toBe(before + 1);
    expect((await events(run_id)).map((e) => e.kind)).toContain('lease.expired');
    await k(`/leases/${again.body.lease_id}/fail`, { error: { code: 'x', message: 'x' }, deterministic: true });
  });

  it('wait_seconds long-polls: 204 after the wait when idle, 200 as soon as work arrives', async () => {
    await drainReady();
    const t0 = Date.now();
    expect((await takeLease(['model'], { wait_seconds: 1 })).status).toBe(204);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    const waiting = takeLease(['model'], { wait_seconds: 10 });
    await new Promise((r) => setTimeout(r, 200));
    const t1 = Date.now();
    const { run_id } = await startRun(refunds, 'refund', { invoice_id: 'i' });
    const got = await waiting;
    expect(got.status).toBe(200);
    expect(got.body.run_id).toBe(run_id);
    expect(Date.now() - t1).toBeLessThan(5_000);
    await k(`/leases/${got.body.lease_id}/fail`, { error: { code: 'x', message: 'x' }, deterministic: true });
  });
});

describe('D §5.2 policies: pinning and the default rule', () => {
  /** A run of refunds at its action step under `policy_set`. */
  async function atAction(over: Record<string, unknown>): Promise<{ run_id: string; lease: any }> {
    await drainReady();
    const { run_id } = await startRun(refunds, 'refund', { invoice_id: 'i' }, over);
    await complete((await takeLease(['model'])).body.lease_id, { amount: 500 });
    await complete((await takeLease(['tool'])).body.lease_id, { rows: [] });
    return { run_id, lease: (await takeLease(['action'])).body };
  }

  it('policy_set entries pin the latest version at run creation, or name@version', async () => {
    for (const v of ['1', '2']) expect((await k('/policies', { name: 'pinme', version: v, source: REFUNDS_POLICY })).status).toBe(201);
    const latest = await startRun(refunds, 'refund', { invoice_id: 'i' }, { policy_set: ['pinme'] });
    expect((await k(`/runs/${latest.run_id}`)).body.policies).toEqual([{ name: 'pinme', version: '2' }]);
    const pinned = await startRun(refunds, 'refund', { invoice_id: 'i' }, { policy_set: ['pinme@1'] });
    expect((await k(`/runs/${pinned.run_id}`)).body.policies).toEqual([{ name: 'pinme', version: '1' }]);
  });

  it('no rule matched: a tool the kernel cannot describe is a system-of-record write, approval_required by role:<manager>, rule default/sor_write', async () => {
    const { run_id, lease } = await atAction({ policy_set: [] });
    const p = await k(`/leases/${lease.lease_id}/actions`, { action: { tool: 'crm.update', args: {} } });
    expect(p.body).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write', approval_id: expect.any(String) });
    const list = await k(`/approvals?state=pending&approver=role:${REQUESTER.manager}`);
    expect(JSON.stringify(list.body)).toContain(p.body.approval_id);
    await k(`/runs/${run_id}/abandon`, { reason: 'done', actor: APPROVER });
  });

  it('under an autonomous remit the same action is allow, rule default/allow', async () => {
    const { run_id, lease } = await atAction({ policy_set: [], autonomy: 'autonomous' });
    const p = await k(`/leases/${lease.lease_id}/actions`, { action: { tool: 'crm.update', args: {} } });
    expect(p.body).toMatchObject({ decision: 'allow', rule: 'default/allow', approval_id: null });
    await k(`/runs/${run_id}/abandon`, { reason: 'done', actor: APPROVER });
  });

  it('most restrictive effect wins across rules: deny over approval_required over allow', async () => {
    const source = 'allow everything\n  when true\n\nrequire_approval big\n  when action.args.amount > 100\n\ndeny huge\n  when action.args.amount > 1000\n';
    expect((await k('/policies', { name: 'order', version: '1', source })).status).toBe(201);
    const { run_id, lease } = await atAction({ policy_set: ['order'] });
    const deny = await k(`/leases/${lease.lease_id}/actions`, { action: { tool: 'billing.refund', args: { amount: 5000 } } });
    expect(deny.status).toBe(403);
    expect(deny.body.error.code).toBe('action_denied');
    const allow = await k(`/leases/${lease.lease_id}/actions`, { action: { tool: 'billing.refund', args: { amount: 5 } } });
    expect(allow.body).toMatchObject({ decision: 'allow', rule: 'order/everything' });
    const approval = await k(`/leases/${lease.lease_id}/actions`, { action: { tool: 'billing.refund', args: { amount: 500 } } });
    expect(approval.body).toMatchObject({ decision: 'approval_required', rule: 'order/big' });
    // A rule without `by` is approved by role:<requested_by.manager>.
    const list = await k(`/approvals?state=pending&approver=role:${REQUESTER.manager}`);
    expect(JSON.stringify(list.body)).toContain(approval.body.approval_id);
    await k(`/runs/${run_id}/abandon`, { reason: 'done', actor: APPROVER });
  });
});

describe('D §5.1 / 5.2 decisions: fail closed, order across policies, facts the worker cannot set', () => {
  async function atAction(over: Record<string, unknown>): Promise<{ run_id: string; lease: any }> {
    await drainReady();
    const { run_id } = await startRun(refunds, 'refund', { invoice_id: 'i' }, over);
    await complete((await takeLease(['model'])).body.lease_id, { amount: 5 });
    await complete((await takeLease(['tool'])).body.lease_id, { rows: [] });
    return { run_id, lease: (await takeLease(['action'])).body };
  }

  it('an expression that fails at decision time counts as matched for deny, not for allow', async () => {
    const source = 'deny no_x\n  when action.args.x > 1\n\nallow yes_y\n  when action.args.y == 1\n';
    expect((await k('/policies', { name: 'closed', version: '1', source })).status).toBe(201);
    const { run_id, lease } = await atAction({ policy_set: ['closed'], autonomy: 'autonomous' });
    const denied = await k(`/leases/${lease.lease_id}/actions`, { action: { tool: 'billing.refund', args: {} } });
    expectError(denied, 403, 'action_denied');
    const decided = (await events(run_id)).filter((e) => e.kind === 'action.decided').at(-1);
    expect(JSON.stringify(decided.payload)).toMatch(/errors/);
    await k(`/runs/${run_id}/abandon`, { reason: 'done', actor: APPROVER });
  });

  it('the rule named is the first matching one with the winning effect, in policy_set order then source order', async () => {
    expect((await k('/policies', { name: 'pa', version: '1', source: 'allow a1\n  when true\n\nallow a2\n  when true\n' })).status).toBe(201);
    expect((await k('/policies', { name: 'pb', version: '1', source: 'allow b1\n  when true\n' })).status).toBe(201);
    const first = await atAction({ policy_set: ['pb', 'pa'], autonomy: 'autonomous' });
    expect((await k(`/leases/${first.lease.lease_id}/actions`, { action: { tool: 'billing.refund', args: {} } })).body.rule).toBe('pb/b1');
    await k(`/runs/${first.run_id}/abandon`, { reason: 'done', actor: APPROVER });
    const second = await atAction({ policy_set: ['pa', 'pb'], autonomy: 'autonomous' });
    expect((await k(`/leases/${second.lease.lease_id}/actions`, { action: { tool: 'billing.refund', args: {} } })).body.rule).toBe('pa/a1');
    await k(`/runs/${second.run_id}/abandon`, { reason: 'done', actor: APPROVER });
  });

  it('writes and system_of_record come from the kernel, never from the worker: a proposal claiming a read is still a system-of-record write', async () => {
    const { run_id, lease } = await atAction({ policy_set: [] });
    const p = await k(`/leases/${lease.lease_id}/actions`, { action: { tool: 'billing.refund', args: {}, writes: false, system_of_record: false } });
    expect(p.body).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write' });
    await k(`/runs/${run_id}/abandon`, { reason: 'done', actor: APPROVER });
  });

  it('policy_invalid positions are 1-based in the whole source: an unknown effect on line 2 is at column 1', async () => {
    const bad = await k('/policies', { name: 'effect', version: '1', source: '# comment\npermit x\n  when true\n' });
    expect(expectError(bad, 422, 'policy_invalid')).toMatchObject({ line: 2, column: 1 });
  });
});

describe('D §1: every timestamp in a response is ISO 8601 UTC with milliseconds', () => {
  /** Every member named `at` or `*_at` anywhere in `value`, with its JSON path. */
  function timestamps(value: unknown, path = ''): Array<[string, unknown]> {
    if (Array.isArray(value)) return value.flatMap((v, i) => timestamps(v, `${path}/${i}`));
    if (value === null || typeof value !== 'object') return [];
    return Object.entries(value).flatMap(([key, v]) => [
      ...((key === 'at' || key.endsWith('_at')) && v !== null ? [[`${path}/${key}`, v] as [string, unknown]] : []),
      ...timestamps(v, `${path}/${key}`),
    ]);
  }

  it('runs, steps, events, approvals, policies, bundles, leases, remits', async () => {
    await drainReady();
    const { run_id } = await startRun(refunds, 'refund', { invoice_id: 'i' }, { policy_set: [] });
    const l1 = await takeLease(['model']);
    await complete(l1.body.lease_id, { amount: 5 });
    await complete((await takeLease(['tool'])).body.lease_id, { rows: [] });
    const act = await takeLease(['action']);
    const p = await k(`/leases/${act.body.lease_id}/actions`, { action: { tool: 'crm.update', args: {} } });
    await k(`/approvals/${p.body.approval_id}`, { decision: 'approved', actor: APPROVER, reason: 'ok' });
    const answers = await Promise.all([
      k(`/runs/${run_id}`), k('/runs'), k(`/runs/${run_id}/events?limit=1000`), k('/approvals'), k(`/approvals?state=approved`),
      k('/policies'), k('/bundles'), k('/keys'), k('/remits', { tools: [], scopes: [], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'observe', policy_set: [], requested_by: REQUESTER }),
    ]);
    const found = [l1, ...answers].flatMap((a) => timestamps(a.body));
    expect(found.length).toBeGreaterThan(10);
    for (const [path, v] of found) expect(v, path).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    await k(`/runs/${run_id}/abandon`, { reason: 'done', actor: APPROVER });
  });
});

describe('I 4.1 health counters and I 5.1 / D §10 bearer token', () => {
  it('GET /health counts running and parked runs', async () => {
    const h = (await k('/health')).body;
    const all = (await k('/runs?limit=500')).body.runs;
    expect(h.runs).toEqual({ running: all.filter((r: any) => r.state === 'running').length, parked: all.filter((r: any) => r.state === 'parked').length });
  });

  it('with SVC_TOKEN every request carries the bearer: none or a wrong one is 401 unauthorized, on every route', async () => {
    const dir = tempDir('svc-spec-token-');
    await using withToken = await spawnSvcd(['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { SVC_TOKEN: 'sekret-token-1' });
    for (const path of ['/health', '/keys', '/metrics', '/runs', '/bundles', '/approvals']) {
      expectError(await k(path, undefined, {}, withToken.kernelUrl), 401, 'unauthorized');
      expectError(await k(path, undefined, { authorization: 'Bearer wrong' }, withToken.kernelUrl), 401, 'unauthorized');
      expect((await k(path, undefined, { authorization: 'Bearer sekret-token-1' }, withToken.kernelUrl)).status, path).toBe(200);
    }
    expectError(await k('/remits', {}, {}, withToken.kernelUrl), 401, 'unauthorized');
    const text = JSON.stringify((await k('/health', undefined, { authorization: 'Bearer wrong' }, withToken.kernelUrl)).body);
    expect(text).not.toContain('sekret-token-1');
  });
});

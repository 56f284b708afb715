/**
 * /v1/policies through a real svcd (interface 2.3, 4.1, 7.1; decisions 5.1–5.3, 10): immutable
 * versions, reads, /policies/test against the written-down flips, pinning and deciding through
 * the kernel's PolicyService.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SvcError } from '../../src/errors.js';
import { toPolicyAction, toPolicyRun } from '../../src/policy/corpus.js';
import { corpusSlices, POLICY_TEST_BODY_BYTES, testInSlices } from '../../src/policy/corpus-slices.js';
import { ROOT, startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { errorFromBody } from '../../cli/http-client.js';
import type { CliError } from '../../cli/exit.js';

const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const v1 = read('fixtures/policies/refunds-v1.policy');
const v2 = read('fixtures/policies/refunds-v2.policy');
const corpus = JSON.parse(read('fixtures/corpora/refunds.json'));
const written = JSON.parse(read('fixtures/corpora/refunds.flips.json'));

async function pushBoth(d: TestDaemon) {
  const a = await d.kernel_('/policies', { body: { name: 'refunds', version: '1.0.0', source: v1 } });
  const b = await d.kernel_('/policies', { body: { name: 'refunds', version: '2.0.0', source: v2 } });
  return [a, b] as const;
}

describe('POST /v1/policies (I 4.1, D 5)', () => {
  it('creates a version (201), finds an identical re-post (200), refuses a changed source (409)', async () => {
    await using d = await startTestDaemon();
    const first = await d.kernel_('/policies', { body: { name: 'refunds', version: '1.0.0', source: v1 } });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ policy_id: expect.stringMatching(/^pol_[0-9A-HJKMNP-TV-Z]{26}$/), name: 'refunds', version: '1.0.0' });
    const again = await d.kernel_('/policies', { body: { name: 'refunds', version: '1.0.0', source: v1 } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const changed = await d.kernel_('/policies', { body: { name: 'refunds', version: '1.0.0', source: v2 } });
    expect(changed.status).toBe(409);
    expect(changed.body.error).toMatchObject({ code: 'policy_version_exists', details: { name: 'refunds', version: '1.0.0', policy_id: first.body.policy_id } });
  });

  it('refuses a source that does not compile with line, column and message (422 policy_invalid)', async () => {
    await using d = await startTestDaemon();
    const res = await d.kernel_('/policies', { body: { name: 'bad', version: '1', source: 'allow ok when true\n\ndeny broken\n  when action.args.amount >' } });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'policy_invalid', details: { line: 4, column: 28, message: 'unexpected end of the condition' } });
    const typed = await d.kernel_('/policies', { body: { name: 'bad', version: '1', source: 'deny x when action.tool > 1' } });
    expect(typed.body.error).toMatchObject({ code: 'policy_invalid', details: { line: 1, column: 13, message: expect.stringMatching(/no such overload/) } });
    expect((await d.kernel_('/policies')).body.policies).toEqual([]);
  });

  it('answers bad bodies with 400 request_invalid and a path', async () => {
    await using d = await startTestDaemon();
    const cases: Array<[unknown, string]> = [
      [{ name: 'p', version: '1' }, '/source'],
      [{ name: 'p@1', version: '1', source: 'allow a when true' }, '/name'],
      [{ name: 'p', version: '1/2', source: 'allow a when true' }, '/version'],
      [{ name: 'p', version: 1, source: 'allow a when true' }, '/version'],
    ];
    for (const [body, path] of cases) {
      const res = await d.kernel_('/policies', { body });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'request_invalid', details: { path } });
    }
    const notJson = await d.kernel_('/policies', { method: 'POST', body: 'allow a when true' });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBe('request_invalid');
  });
});

describe('GET /v1/policies, /{name}, /{name}/{version} (I 4.1)', () => {
  it('lists versions, returns the latest by name and an exact version', async () => {
    await using d = await startTestDaemon();
    const [a, b] = await pushBoth(d);
    await d.kernel_('/policies', { body: { name: 'access', version: '1', source: 'deny nobody when false' } });
    const list = await d.kernel_('/policies');
    expect(list.status).toBe(200);
    expect(list.body.policies.map((p: { name: string; version: string }) => `${p.name}@${p.version}`)).toEqual(['access@1', 'refunds@1.0.0', 'refunds@2.0.0']);
    expect(list.body.policies[1]).toEqual({ policy_id: a.body.policy_id, name: 'refunds', version: '1.0.0', created_at: expect.any(String) });

    const latest = await d.kernel_('/policies/refunds');
    expect(latest.status).toBe(200);
    expect(latest.body).toEqual({ policy_id: b.body.policy_id, name: 'refunds', version: '2.0.0', source: v2, created_at: expect.any(String) });
    const exact = await d.kernel_('/policies/refunds/1.0.0');
    expect(exact.body).toMatchObject({ policy_id: a.body.policy_id, version: '1.0.0', source: v1 });
  });

  it('"latest" is the most recently posted version', async () => {
    await using d = await startTestDaemon();
    await d.kernel_('/policies', { body: { name: 'p', version: '2.0.0', source: 'allow a when true' } });
    await d.kernel_('/policies', { body: { name: 'p', version: '1.0.1', source: 'allow b when true' } });
    expect((await d.kernel_('/policies/p')).body.version).toBe('1.0.1');
  });

  it('answers unknown names and versions with 404 not_found, resource policy', async () => {
    await using d = await startTestDaemon();
    await pushBoth(d);
    const name = await d.kernel_('/policies/nope');
    expect(name.status).toBe(404);
    expect(name.body.error).toMatchObject({ code: 'not_found', details: { resource: 'policy', id: 'nope' } });
    const version = await d.kernel_('/policies/refunds/9.9.9');
    expect(version.status).toBe(404);
    expect(version.body.error).toMatchObject({ code: 'not_found', details: { resource: 'policy', id: 'refunds@9.9.9' } });
  });
});

describe('POST /v1/policies/test (D 5.3)', () => {
  it('compares two stored versions over the corpus: the written-down flips', async () => {
    await using d = await startTestDaemon();
    await pushBoth(d);
    const res = await d.kernel_('/policies/test', {
      body: { policy_a: { name: 'refunds', version: '1.0.0' }, policy_b: { name: 'refunds', version: '2.0.0' }, corpus },
    });
    expect(res.status).toBe(200);
    expect(res.body.cases).toBe(corpus.length);
    expect(res.body.flips).toEqual(written.flips);
    expect(res.body.policy_a).toEqual({ name: 'refunds', version: '1.0.0' });
  });

  it('compares a stored version with a source under test; no version means the latest', async () => {
    await using d = await startTestDaemon();
    await d.kernel_('/policies', { body: { name: 'refunds', version: '1.0.0', source: v1 } });
    const res = await d.kernel_('/policies/test', { body: { policy_a: { name: 'refunds' }, policy_b: { source: v2 }, corpus } });
    expect(res.status).toBe(200);
    expect(res.body.flips).toEqual(written.flips);
    expect(res.body.policy_b).toEqual({ name: 'refunds', source: true });
  });

  it('same policy on both sides: no flips', async () => {
    await using d = await startTestDaemon();
    await pushBoth(d);
    const res = await d.kernel_('/policies/test', { body: { policy_a: { name: 'refunds', version: '2.0.0' }, policy_b: { name: 'refunds' }, corpus } });
    expect(res.body).toMatchObject({ cases: corpus.length, flips: [] });
  });

  it('errors: unknown policy 404, bad source 422, bad case 400, bad body 400', async () => {
    await using d = await startTestDaemon();
    await pushBoth(d);
    const unknown = await d.kernel_('/policies/test', { body: { policy_a: { name: 'ghost', version: '1' }, policy_b: { source: v2 }, corpus } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: 'not_found', details: { resource: 'policy' } });

    const badSource = await d.kernel_('/policies/test', { body: { policy_a: { name: 'refunds' }, policy_b: { source: 'allow x when' }, corpus } });
    expect(badSource.status).toBe(422);
    expect(badSource.body.error).toMatchObject({ code: 'policy_invalid', details: { line: 1, column: 13 } });

    const badCase = await d.kernel_('/policies/test', {
      body: { policy_a: { name: 'refunds' }, policy_b: { source: v2 }, corpus: [...corpus.slice(0, 3), { action: { args: {} } }] },
    });
    expect(badCase.status).toBe(400);
    expect(badCase.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/corpus/3/action/tool' } });

    const badAutonomy = await d.kernel_('/policies/test', {
      body: { policy_a: { name: 'refunds' }, policy_b: { source: v2 }, corpus: [{ action: { tool: 'a.b' }, run: { remit: { autonomy: 'god' } } }] },
    });
    expect(badAutonomy.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/corpus/0/run/remit/autonomy' } });

    const both = await d.kernel_('/policies/test', { body: { policy_a: { name: 'refunds' }, policy_b: { source: v2, version: '1' }, corpus } });
    expect(both.status).toBe(400);
    expect(both.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/policy_b' } });

    const missing = await d.kernel_('/policies/test', { body: { policy_a: { name: 'refunds' }, corpus } });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/policy_b' } });

    const notArray = await d.kernel_('/policies/test', { body: { policy_a: { name: 'refunds' }, policy_b: { name: 'refunds' }, corpus: {} } });
    expect(notArray.status).toBe(400);
    expect(notArray.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/corpus' } });
  });
});

describe('a conversion that fails fails closed through the kernel (D 5.1, D 5.3)', () => {
  it('int("") is an error, not 0: the deny rule matches an empty summary', async () => {
    await using d = await startTestDaemon();
    const source = 'deny short when int(action.summary) > 3';
    expect((await d.kernel_('/policies', { body: { name: 'conv', version: '1', source } })).status).toBe(201);
    const cases = ['', '2', '7', ' 5', '0x10'].map((summary) => ({ action: { tool: 'crm.note', summary, writes: false } }));
    const res = await d.kernel_('/policies/test', { body: { policy_a: { name: 'conv' }, policy_b: { source: 'deny never when false' }, corpus: cases } });
    expect(res.status).toBe(200);
    expect(res.body.flips).toEqual([0, 2, 3, 4].map((index) => ({ index, a: 'deny', b: 'allow', rule_a: 'conv/short', rule_b: 'default/allow' })));
    // Asked to explain (svc's extension), the flips whose deny comes from the condition failing
    // closed say so (errors_a); the one that matched as written ("7") does not.
    const explained = await d.kernel_('/policies/test', { body: { policy_a: { name: 'conv' }, policy_b: { source: 'deny never when false' }, corpus: cases, explain: true } });
    const failed = { errors_a: [{ rule: 'conv/short', message: expect.stringMatching(/^int\(\) conversion error/) }] };
    expect(explained.body.flips).toEqual([0, 2, 3, 4].map((index) => ({ index, a: 'deny', b: 'allow', rule_a: 'conv/short', rule_b: 'default/allow', ...(index === 2 ? {} : failed) })));
    expect((await d.kernel_('/policies/test', { body: { policy_a: { name: 'conv' }, policy_b: { source: 'deny never when false' }, corpus: cases, explain: 'yes' } })).status).toBe(400);
    const policies = d.kernel!.policies;
    const decided = await policies.decide([{ name: 'conv', version: '1' }], toPolicyAction(cases[0]!.action), toPolicyRun({}));
    expect(decided).toMatchObject({ decision: 'deny', rule: 'conv/short', errors: [{ rule: 'conv/short', message: expect.stringMatching(/^int\(\) conversion error/) }] });
  });
});

describe('kernel.policies: pin and decide (D 5.2)', () => {
  it('pins names to their latest version and keeps name@version; unknown is 422 policy_not_found', async () => {
    await using d = await startTestDaemon();
    await pushBoth(d);
    const policies = d.kernel!.policies;
    expect(await policies.pin(['refunds'])).toEqual([{ name: 'refunds', version: '2.0.0' }]);
    expect(await policies.pin(['refunds@1.0.0', 'refunds@1.0.0'])).toEqual([{ name: 'refunds', version: '1.0.0' }]);
    for (const entry of ['ghost', 'refunds@7.0.0']) {
      const err = await policies.pin([entry]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SvcError);
      expect(err).toMatchObject({ code: 'policy_not_found', status: 422, details: { policy: entry } });
    }
  });

  it('decides under pinned versions, compiled once per version', async () => {
    await using d = await startTestDaemon();
    await pushBoth(d);
    const policies = d.kernel!.policies;
    const action = toPolicyAction({ tool: 'billing.refund', args: { amount: 180 }, writes: true, system_of_record: true });
    const run = toPolicyRun({ requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' }, remit: { autonomy: 'supervised', grants: [] } });
    const a = await policies.decide([{ name: 'refunds', version: '1.0.0' }], action, run);
    expect(a).toMatchObject({ decision: 'approval_required', rule: 'refunds/large_refund', approver: 'role:finance' });
    const b = await policies.decide([{ name: 'refunds', version: '2.0.0' }], action, run);
    expect(b).toMatchObject({ decision: 'allow', rule: 'refunds/small_refund', approver: null });
    expect(await policies.compiled({ name: 'refunds', version: '1.0.0' })).toBe(await policies.compiled({ name: 'refunds', version: '1.0.0' }));
    expect(await policies.decide([], action, run)).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write', approver: 'role:support-lead' });
  });
});

describe('POST /v1/policies/test body limit (D 5.3, D §10)', () => {
  it('refuses a body over 1 MiB with 413; a 10,000-case corpus goes in slices with the same flips', async () => {
    await using d = await startTestDaemon();
    expect((await d.kernel_('/policies', { body: { name: 'big', version: '1', source: 'allow a when action.args.amount < 5000' } })).status).toBe(201);
    const corpus = Array.from({ length: 10_000 }, (_, i) => ({ action: { tool: 'billing.refund', args: { amount: i, note: 'x'.repeat(200) } }, run: { department: 'support' } }));
    const body = { policy_a: { name: 'big' }, policy_b: { source: 'allow a when action.args.amount < 7000' }, corpus };
    expect(JSON.stringify(body).length).toBeGreaterThan(2 * 1024 * 1024);
    const whole = await d.kernel_('/policies/test', { body });
    expect(whole.status).toBe(413);
    expect(whole.body.error.code).toBe('payload_too_large');
    // The limit is said, so a client knows what fits (a CLI user read only "too large").
    expect(whole.body.error).toMatchObject({ message: "request body is over this route's limit of 1048576 bytes", details: { limit_bytes: 1048576 } });
    const remit = await d.kernel_('/remits', { body: { pad: 'x'.repeat(1024 * 1024 + 10) } });
    expect(remit.status).toBe(413);

    let requests = 0;
    const result = await testInSlices(async (b) => {
      requests++;
      expect(JSON.stringify(b).length).toBeLessThanOrEqual(POLICY_TEST_BODY_BYTES);
      const r = await d.kernel_('/policies/test', { body: b });
      expect(r.status).toBe(200);
      return r.body;
    }, body);
    expect(requests).toBeGreaterThan(2);
    expect(result.cases).toBe(10_000);
    expect(result.policy_a).toEqual({ name: 'big', version: '1' });
    // Amounts 5000–6999 flip from the default to allow, numbered across the slices.
    expect(result.flips.map((f) => f.index)).toEqual(Array.from({ length: 2000 }, (_, i) => 5000 + i));
    expect(result.flips[0]).toMatchObject({ b: 'allow' });
  });
});

describe('a refused case of a corpus sent in slices (svc(1) "policy test": /corpus/N across the whole corpus)', () => {
  it("is named by its place in the whole corpus, in the message and details.path, as the CLI's error and as a service error", async () => {
    await using d = await startTestDaemon();
    expect((await d.kernel_('/policies', { body: { name: 'p', version: '1', source: 'allow a when true' } })).status).toBe(201);
    const good = (i: number) => ({ action: { tool: 'billing.refund', args: { amount: i } } });
    const corpus: unknown[] = Array.from({ length: 40 }, (_, i) => good(i));
    corpus[23] = { action: { tool: 'billing.refund', writes: 'yes' } };
    const body = { policy_a: { name: 'p' }, policy_b: { source: 'deny d when true' }, corpus };
    let slices = 0;
    // As svc policy test sends it (cli/commands/policy.ts): the answer turned into a CliError.
    const err = (await testInSlices(
      async (b) => {
        slices++;
        const r = await d.kernel_('/policies/test', { body: b });
        if (r.status !== 200) throw errorFromBody(r.status, r.body);
        return r.body;
      },
      body,
      600,
    ).catch((e: unknown) => e)) as CliError;
    expect(slices).toBeGreaterThan(2); // the bad case is in a later slice, not at its start
    expect((err.body as any).error).toMatchObject({ code: 'request_invalid', message: '/corpus/23/action/writes must be a boolean', details: { path: '/corpus/23/action/writes' } });
    expect(err.message).toBe('request_invalid: /corpus/23/action/writes must be a boolean');
    // A service error (details on the error itself) the same; /corpus/2 is not /corpus/23's prefix.
    const svcErr = (await testInSlices(
      async (b) => {
        const r = await d.kernel_('/policies/test', { body: b });
        if (r.status !== 200) throw new SvcError(r.body.error.code, r.body.error.message, r.body.error.details);
        return r.body;
      },
      body,
      600,
    ).catch((e: unknown) => e)) as SvcError;
    expect(svcErr).toMatchObject({ message: '/corpus/23/action/writes must be a boolean', details: { path: '/corpus/23/action/writes' } });
    // An error that names no case passes as it is.
    const other = await testInSlices(async () => Promise.reject(new SvcError('unavailable', 'down /corpus/1', {})), body, 600).catch((e: unknown) => e);
    expect(other).toMatchObject({ message: 'down /corpus/1' });
  });

  it('each member of a case has its type: a wrong one is 400 request_invalid at its path, never taken as a default (D 5.3, D §10)', async () => {
    await using d = await startTestDaemon();
    expect((await d.kernel_('/policies', { body: { name: 'p', version: '1', source: 'allow a when true' } })).status).toBe(201);
    const action = { tool: 'billing.refund' };
    for (const [c, path, message] of [
      [{ action: { ...action, writes: 'false' } }, '/corpus/0/action/writes', 'must be a boolean'],
      [{ action: { ...action, system_of_record: 0 } }, '/corpus/0/action/system_of_record', 'must be a boolean'],
      [{ action: { ...action, connector: 7 } }, '/corpus/0/action/connector', 'must be a string'],
      [{ action: { ...action, args: [1] } }, '/corpus/0/action/args', 'must be an object'],
      [{ action: 'billing.refund' }, '/corpus/0/action', 'must be an object'],
      [{ action, run: [] }, '/corpus/0/run', 'must be an object'],
      [{ action, run: { requested_by: 'ana' } }, '/corpus/0/run/requested_by', 'must be an object'],
      [{ action, run: { requested_by: { manager: 5 } } }, '/corpus/0/run/requested_by/manager', 'must be a string'],
      [{ action, run: { usage: 3 } }, '/corpus/0/run/usage', 'must be an object'],
      [{ action, run: { usage: { usd: '0.5' } } }, '/corpus/0/run/usage/usd', 'must be a number'],
      [{ action, run: { remit: 'autonomous' } }, '/corpus/0/run/remit', 'must be an object'],
      [{ action, run: { remit: { grants: 'pii' } } }, '/corpus/0/run/remit/grants', 'must be an array of strings'],
      [{ action, run: { remit: { tools: ['a.*', 1] } } }, '/corpus/0/run/remit/tools', 'must be an array of strings'],
    ] as const) {
      const r = await d.kernel_('/policies/test', { body: { policy_a: { name: 'p' }, policy_b: { source: 'deny d when true' }, corpus: [c] } });
      expect(r.status, JSON.stringify(c)).toBe(400);
      expect(r.body.error, JSON.stringify(c)).toEqual({ code: 'request_invalid', message: `${path} ${message}`, details: { path } });
    }
  });
});

describe('corpusSlices', () => {
  it('keeps order, stays within the budget, and gives an oversize case a slice of its own', () => {
    const corpus = [{ a: 'x'.repeat(10) }, { a: 'y'.repeat(50) }, { a: 'z' }, { a: 'w'.repeat(500) }, { a: 'v' }];
    const slices = corpusSlices(corpus, 100);
    expect(slices.flat()).toEqual(corpus);
    for (const s of slices) if (s.length > 1) expect(Buffer.byteLength(JSON.stringify(s))).toBeLessThanOrEqual(100);
    expect(slices).toContainEqual([{ a: 'w'.repeat(500) }]);
    expect(corpusSlices([], 100)).toEqual([[]]);
    // The kernel's case limit holds too, however small the cases.
    expect(corpusSlices(Array.from({ length: 25 }, () => ({})), 1e6, 10).map((s) => s.length)).toEqual([10, 10, 5]);
  });
});

describe('a stored policy accepted before a stricter check (D 5.2 pinning; svc-policy(5) matches)', () => {
  it('re-posts as 200, is pinned and decides fail-closed, and replays', async () => {
    const { default: Database } = await import('better-sqlite3');
    const { mintRemit, propose, pushBundle, leaseAndComplete, lease, startRunDaemon } = await import('./run-fixtures.js');
    await using d = await startRunDaemon();
    const source = 'deny bad_pattern when action.tool.matches("(")\n';
    expect((await d.kernel_('/policies', { body: { name: 'legacy', version: '1', source } })).body.error.code).toBe('policy_invalid');
    // As an older svcd stored it, when literal patterns were not checked yet.
    const db = new Database(join(d.dataDir, 'kernel.db'));
    db.prepare('INSERT INTO policies (policy_id, name, version, source, created_at) VALUES (?, ?, ?, ?, ?)').run('pol_01J0000000000000000000LEGA', 'legacy', '1', source, '2026-11-01T00:00:00.000Z');
    db.close();
    const again = await d.kernel_('/policies', { body: { name: 'legacy', version: '1', source } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ policy_id: 'pol_01J0000000000000000000LEGA', name: 'legacy', version: '1' });

    const bundleId = await pushBundle(d);
    const remit = await mintRemit(d, { policy_set: ['legacy'] });
    const run = await d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-1' }, remit_id: remit.remit_id, requested_by: { id: 'ana', role: 'agent', manager: 'finance' } } });
    expect(run.status).toBe(201);
    await leaseAndComplete(d, { amount: 50 }, undefined, ['model']);
    await leaseAndComplete(d, { rows: [] }, undefined, ['tool']);
    const l = await lease(d, ['action']);
    const decided = await propose(d, l.body.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 50 } });
    expect(decided.status).toBe(403);
    expect(decided.body.error).toMatchObject({ code: 'action_denied' });
    expect(JSON.stringify(decided.body)).toContain('legacy/bad_pattern');
    const replay = await d.kernel_(`/runs/${run.body.run_id}/replay`, { body: {} });
    expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true, decision_mismatches: [] });
  });
});

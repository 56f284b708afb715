/**
 * The inbox's data layer with a fake fetch: the approvals client (interface 4.1 GET/POST
 * /approvals, GET /runs/{id}, GET /runs/{id}/events; decisions 5.4, §6, §7, §10) and the
 * poller that feeds the screen.
 */
import { describe, expect, it } from 'vitest';
import { ApiError, ApprovalsApi, sortNewestFirst, type FetchLike } from '../../cli/tui/approvals-api.js';
import { TransportError } from '../../cli/http-client.js';
import { InboxSource, explainNotTheApprover, matchesFilter, type InboxSnapshot } from '../../cli/tui/inbox-source.js';
import { FakeKernel, approval, eventsOf, runOf, until } from './fake-kernel.js';

const URL_ = 'http://kernel.test:7401';
const FIN = { id: 'fin-1', role: 'finance' };

function apiOver(k: FakeKernel, token?: string) {
  return new ApprovalsApi({ baseUrl: URL_ + '/', token, fetch: k.fetch });
}


describe('ApprovalsApi (I 4.1, D 5.4)', () => {
  it('reads every page of GET /v1/approvals with the state and approver filters, newest first', async () => {
    const k = new FakeKernel();
    k.pageSize = 2;
    for (let i = 1; i <= 5; i++) k.add(approval(i));
    k.add(approval(6, { approver: 'role:legal' }));
    k.add(approval(7, { state: 'approved' }));
    const list = await apiOver(k).listAll({ state: 'pending', approver: 'role:finance' });
    expect(list.map((a) => a.approval_id.slice(-1))).toEqual(['5', '4', '3', '2', '1']);
    const gets = k.calls.filter((c) => c.path === '/approvals');
    expect(gets).toHaveLength(3);
    expect(gets[0]!.query).toEqual({ state: 'pending', approver: 'role:finance', limit: '100' });
    expect(gets[1]!.query.after).toBe('apr_01JTEST000000000000000004');
  });

  it('stops at the cap', async () => {
    const k = new FakeKernel();
    k.pageSize = 2;
    for (let i = 1; i <= 5; i++) k.add(approval(i));
    expect(await apiOver(k).listAll({}, 3)).toHaveLength(3);
  });

  it('sends the bearer token and a JSON decision body with the actor', async () => {
    const k = new FakeKernel();
    k.token = 's3cret';
    const a = k.add(approval(1));
    const res = await apiOver(k, 's3cret').decide(a.approval_id, 'rejected', FIN, 'duplicate');
    expect(res).toEqual({ run_id: a.run_id, run_state: 'running' });
    const post = k.calls.find((c) => c.method === 'POST')!;
    expect(post.headers.authorization).toBe('Bearer s3cret');
    expect(post.headers['content-type']).toBe('application/json');
    expect(post.body).toEqual({ decision: 'rejected', actor: FIN, reason: 'duplicate' });
  });

  it('turns the I 7.1 envelope into ApiError with code, status and details', async () => {
    const k = new FakeKernel();
    const err = await apiOver(k).get('apr_nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 404, code: 'not_found', details: { resource: 'approval', id: 'apr_nope' } });
    const plain: FetchLike = async () => ({ status: 502, headers: { get: () => 'text/plain' }, text: async () => 'Bad Gateway' });
    const e2 = await new ApprovalsApi({ baseUrl: URL_, fetch: plain }).get('x').catch((e: unknown) => e);
    expect(e2).toMatchObject({ status: 502, code: 'not_svcd', message: `HTTP 502 from ${URL_} is not an svcd answer; is the URL svcd's?` });
    // Another server's JSON error, or a 200 that is not svcd's JSON object: not svcd either.
    const foreign: FetchLike = async () => ({ status: 404, headers: { get: () => 'application/json' }, text: async () => '{"error":"Not Found","statusCode":404}' });
    expect(await new ApprovalsApi({ baseUrl: URL_, fetch: foreign }).get('x').catch((e: unknown) => e)).toMatchObject({ status: 404, code: 'not_svcd' });
    const page: FetchLike = async () => ({ status: 200, headers: { get: () => 'text/html' }, text: async () => '<html></html>' });
    expect(await new ApprovalsApi({ baseUrl: URL_, fetch: page }).list({}).catch((e: unknown) => e)).toMatchObject({ status: 200, code: 'not_svcd' });
  });

  it('reports a connection failure as TransportError naming the address', async () => {
    const k = new FakeKernel();
    k.down = true;
    const err = await apiOver(k).list().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect((err as Error).message).toBe('cannot reach svcd at http://kernel.test:7401 (ECONNREFUSED)');
  });

  it('reads only the tail of the event log when last_seq is known, and walks it when not', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1), undefined, Array.from({ length: 30 }, (_, i) => ({ seq: i + 1, kind: `k${i + 1}` })));
    const api = apiOver(k);
    const tail = await api.recentEvents(a.run_id, 8, 30);
    expect(tail.map((e) => e.seq)).toEqual([23, 24, 25, 26, 27, 28, 29, 30]);
    expect(k.calls.at(-1)!.query).toEqual({ from_seq: '23', limit: '8' });
    const walked = await api.recentEvents(a.run_id, 3);
    expect(walked.map((e) => e.kind)).toEqual(['k28', 'k29', 'k30']);
    expect(await api.recentEvents(a.run_id, 8, 0)).toEqual([]);
  });

  it('reads on when svcd stops a page short of its limit (pages are bounded in bytes too)', async () => {
    const k = new FakeKernel();
    k.eventPageCap = 3;
    const a = k.add(approval(1), undefined, Array.from({ length: 30 }, (_, i) => ({ seq: i + 1, kind: `k${i + 1}` })));
    const api = apiOver(k);
    expect((await api.recentEvents(a.run_id, 8, 30)).map((e) => e.seq)).toEqual([23, 24, 25, 26, 27, 28, 29, 30]);
    expect((await api.recentEvents(a.run_id, 5)).map((e) => e.seq)).toEqual([26, 27, 28, 29, 30]);
  });

  it('sorts newest first by created_at, then id', () => {
    const a = approval(1, { created_at: '2026-01-01T10:00:00.000Z' });
    const b = approval(2, { created_at: '2026-01-01T10:00:00.000Z' });
    const c = approval(3, { created_at: '2026-01-01T09:00:00.000Z' });
    expect(sortNewestFirst([c, a, b]).map((x) => x.approval_id)).toEqual([b.approval_id, a.approval_id, c.approval_id]);
  });
});

describe('InboxSource: polling the kernel for one role', () => {
  it('loads the pending approvals of the role with their runs, and the focused run events', async () => {
    const k = new FakeKernel();
    const a1 = k.add(approval(1));
    const a2 = k.add(approval(2));
    k.add(approval(3, { approver: 'role:legal' }));
    const src = new InboxSource({ api: apiOver(k), actor: FIN });
    await src.refresh();
    let s = src.snapshot();
    expect(s.approver).toBe('role:finance');
    expect(s.loaded).toBe(true);
    expect(s.connection.state).toBe('ok');
    expect(s.approvals.map((a) => a.approval_id)).toEqual([a2.approval_id, a1.approval_id]);
    expect(Object.keys(s.runs).sort()).toEqual([a1.run_id, a2.run_id].sort());
    expect(s.events).toEqual({});
    src.focus(a2.run_id);
    s = await until(() => src.snapshot().events[a2.run_id] && src.snapshot());
    expect(s.events[a2.run_id]!.map((e) => e.kind)).toEqual(eventsOf().map((e) => e.kind));
  });

  it('refreshes every interval: new approvals appear and decided ones leave, with their runs', async () => {
    const k = new FakeKernel();
    const a1 = k.add(approval(1));
    const src = new InboxSource({ api: apiOver(k), actor: FIN, intervalMs: 20 });
    const seen: InboxSnapshot[] = [];
    const off = src.subscribe((s) => seen.push(s));
    src.start();
    try {
      await until(() => src.snapshot().approvals.length === 1);
      const a2 = k.add(approval(2));
      await until(() => src.snapshot().approvals[0]?.approval_id === a2.approval_id);
      k.decideAs(a1.approval_id, 'approved', { id: 'fin-2', role: 'finance' }, '');
      await until(() => src.snapshot().approvals.length === 1 && !src.snapshot().runs[a1.run_id]);
      expect(src.snapshot().runs[a2.run_id]).toBeDefined();
    } finally {
      src.stop();
      off();
    }
    const calls = k.calls.length;
    await new Promise((r) => setTimeout(r, 80));
    expect(k.calls.length).toBe(calls);
    expect(seen.length).toBeGreaterThan(3);
  });

  it('keeps the focused run fresh on every poll', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const src = new InboxSource({ api: apiOver(k), actor: FIN });
    await src.refresh();
    src.focus(a.run_id);
    await until(() => src.snapshot().events[a.run_id]);
    k.runs.set(a.run_id, runOf(a, { usage: { tokens: 5000, usd: 1.5 }, last_seq: 7 }));
    k.events.get(a.run_id)!.push({ seq: 7, kind: 'note' });
    await src.refresh();
    await until(() => src.snapshot().events[a.run_id]!.at(-1)?.seq === 7);
    expect(src.snapshot().runs[a.run_id]!.usage).toEqual({ tokens: 5000, usd: 1.5 });
  });

  it('reports an unreachable daemon with the URL and attempts, keeps retrying, and recovers', async () => {
    const k = new FakeKernel();
    k.add(approval(1));
    k.down = true;
    const src = new InboxSource({ api: apiOver(k), actor: FIN, intervalMs: 10 });
    src.start();
    try {
      const c = await until(() => {
        const conn = src.snapshot().connection;
        return conn.state === 'unreachable' && conn.attempts >= 3 && conn;
      });
      expect(c).toMatchObject({ url: URL_, error: 'ECONNREFUSED' });
      const since = c.state === 'unreachable' ? c.since : '';
      const later = await until(() => {
        const conn = src.snapshot().connection;
        return conn.state === 'unreachable' && conn.attempts >= 4 && conn;
      });
      expect(later.state === 'unreachable' && later.since).toBe(since);
      k.down = false;
      await until(() => src.snapshot().connection.state === 'ok' && src.snapshot().approvals.length === 1);
    } finally {
      src.stop();
    }
  });

  it('reports an error answer (401 unauthorized) as such', async () => {
    const k = new FakeKernel();
    k.token = 'right';
    const src = new InboxSource({ api: apiOver(k, 'wrong'), actor: FIN });
    await src.refresh();
    expect(src.snapshot().connection).toMatchObject({ state: 'error', code: 'unauthorized', attempts: 1 });
    expect(src.snapshot().loaded).toBe(false);
  });

  it('decides and refreshes: the approval leaves the inbox', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const src = new InboxSource({ api: apiOver(k), actor: FIN });
    await src.refresh();
    const out = await src.decide(a.approval_id, 'approved', '');
    expect(out).toEqual({ ok: true, approval_id: a.approval_id, decision: 'approved', run_id: a.run_id, run_state: 'running' });
    expect(src.snapshot().approvals).toEqual([]);
  });

  it('a lost race (409 already_decided) comes back with the approval as it now stands', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const src = new InboxSource({ api: apiOver(k), actor: FIN });
    await src.refresh();
    k.decideAs(a.approval_id, 'rejected', { id: 'fin-2', role: 'finance' }, 'duplicate');
    const out = await src.decide(a.approval_id, 'approved', '');
    expect(out.ok).toBe(false);
    expect(out).toMatchObject({ code: 'already_decided', current: { decision: 'rejected', actor: { id: 'fin-2', role: 'finance' }, reason: 'duplicate' } });
    expect(src.snapshot().approvals).toEqual([]);
  });

  it('an approval cancelled by an abandon (409 invalid_state) is a lost race too', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const src = new InboxSource({ api: apiOver(k), actor: FIN });
    await src.refresh();
    k.approvals.set(a.approval_id, { ...a, state: 'cancelled' });
    expect(await src.decide(a.approval_id, 'rejected', 'no')).toMatchObject({ ok: false, code: 'already_decided', current: { state: 'cancelled' } });
  });

  it('a refusal (403 not_the_approver), a missing approval and an unreachable daemon are outcomes, not throws', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const src = new InboxSource({ api: apiOver(k), actor: { id: 'x', role: 'legal' } });
    expect(await src.decide(a.approval_id, 'approved', '')).toMatchObject({ ok: false, code: 'not_the_approver', status: 403 });
    expect(await src.decide('apr_missing', 'approved', '')).toMatchObject({ ok: false, code: 'not_found', status: 404 });
    k.down = true;
    expect(await src.decide(a.approval_id, 'approved', '')).toMatchObject({ ok: false, code: 'unreachable', status: null });
  });

  it('a decision svcd took but did not answer in time is unconfirmed, not failed: it may have been recorded (svc(1) --timeout)', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const src = new InboxSource({ api: new ApprovalsApi({ baseUrl: URL_, fetch: k.fetch, timeoutMs: 100 }), actor: FIN });
    await src.refresh();
    k.silentAfterPost = true;
    const out = await src.decide(a.approval_id, 'approved', 'ok');
    expect(out).toMatchObject({ ok: false, code: 'unconfirmed', message: `no answer from ${URL_} within 0.1 s; the decision may have been recorded all the same: the list shows it once svcd answers` });
    expect(k.approvals.get(a.approval_id)!.state).toBe('approved'); // it was
    expect(src.snapshot().approvals).toEqual([]); // and the next look shows it
  });
});

describe('filter and 403 explanations', () => {
  const a = approval(7);
  const run = runOf(a, { requested_by: { id: 'Bob', role: 'sales', manager: 'finance' } });
  it('matches tool, run id, rule and requester, case-insensitively', () => {
    expect(matchesFilter(a, run, 'REFUND')).toBe(true);
    expect(matchesFilter(a, run, '0007')).toBe(true);
    expect(matchesFilter(a, run, 'large_')).toBe(true);
    expect(matchesFilter(a, run, 'bob')).toBe(true);
    expect(matchesFilter(a, run, 'sales')).toBe(true);
    expect(matchesFilter(a, run, 'crm')).toBe(false);
    expect(matchesFilter(a, undefined, 'bob')).toBe(false);
    expect(matchesFilter(a, undefined, '  ')).toBe(true);
  });
  it('says whether the role is wrong or the actor requested the run (D 5.4)', () => {
    expect(explainNotTheApprover({ id: 'x', role: 'legal' }, a, run, 'srv')).toBe('you act as role:legal but this approval needs role:finance');
    expect(explainNotTheApprover({ id: 'Bob', role: 'finance' }, a, run, 'srv')).toBe('Bob requested this run; a requester cannot approve their own run');
    expect(explainNotTheApprover({ id: 'z', role: 'finance' }, a, run, 'srv said so')).toBe('srv said so');
    expect(explainNotTheApprover({ id: 'z', role: 'finance' }, a, undefined, 'srv', { reason: 'self_approval' })).toBe('z requested this run; a requester cannot approve their own run');
  });
});

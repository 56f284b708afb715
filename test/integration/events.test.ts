/**
 * A run's event log over HTTP (interface 4.1, 5.2, 6; decisions §7, §10): reading with
 * from_seq/limit/next_seq, external kinds with X-Svc-Lease or X-Svc-Remit, the refusals,
 * svc_events_total, and the in-process append the gateway uses.
 */
import { describe, expect, it } from 'vitest';
import { allEvents, getRun, lease, mintRemit, pushBundle, startRun, startRunDaemon } from './run-fixtures.js';

describe('GET /runs/{id}/events (D §7)', () => {
  it('pages with from_seq and limit; next_seq is the seq to ask for next; every hash links', async () => {
    await using d = await startRunDaemon();
    const { run_id, token } = await startRun(d, await pushBundle(d));
    for (let i = 0; i < 6; i++) {
      const r = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: { i }, actor: { id: 'w' } }, headers: { 'x-svc-remit': (await d.kernel!.remits.tokenFor((await getRun(d, run_id)).remit_id)) } });
      expect(r.status).toBe(201);
      expect(r.body).toEqual({ seq: i + 2, hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    }
    expect(token).toMatch(/^krt1\./);
    const p1 = await d.kernel_(`/runs/${run_id}/events?limit=3`);
    expect(p1.body.events.map((e: any) => e.seq)).toEqual([1, 2, 3]);
    expect(p1.body.next_seq).toBe(4);
    const p2 = await d.kernel_(`/runs/${run_id}/events?from_seq=4&limit=3`);
    expect(p2.body.events.map((e: any) => e.seq)).toEqual([4, 5, 6]);
    const p3 = await d.kernel_(`/runs/${run_id}/events?from_seq=7`);
    expect(p3.body.events.map((e: any) => e.seq)).toEqual([7]);
    expect(p3.body.next_seq).toBe(8);
    const empty = await d.kernel_(`/runs/${run_id}/events?from_seq=8`);
    expect(empty.body).toEqual({ events: [], next_seq: 8 });

    const all = await allEvents(d, run_id);
    expect(Object.keys(all[0]).sort()).toEqual(['actor', 'at', 'hash', 'kind', 'payload', 'prev_hash', 'seq']);
    expect(all[0].prev_hash).toBe('');
    for (let i = 1; i < all.length; i++) expect(all[i].prev_hash).toBe(all[i - 1].hash);
    expect(all[0].payload).toMatchObject({ run_id, workflow: 'refund', steps: [{ id: 'triage', kind: 'model', compensate: false }, expect.anything(), expect.anything()] });
    expect((await getRun(d, run_id)).head_hash).toBe(all[all.length - 1].hash);

    for (const q of ['limit=0', 'limit=1001', 'limit=x', 'from_seq=-1']) {
      const r = await d.kernel_(`/runs/${run_id}/events?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error.code).toBe('request_invalid');
    }
    expect((await d.kernel_('/runs/run_nope/events')).status).toBe(404);
  });
});

describe('GET /runs/{id}/events bounded in bytes (D §7 next_seq; svcd(8) LIMITS)', () => {
  it('stops a page at 8 MiB of event text, next_seq where it stopped, and the rest follows; a lease context keeps the newest that fit', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const remit = await d.kernel!.remits.tokenFor((await getRun(d, run_id)).remit_id);
    const big = 'x'.repeat(900 * 1024);
    for (let i = 0; i < 12; i++) {
      const r = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: { i, big }, actor: { id: 'w' } }, headers: { 'x-svc-remit': remit } });
      expect(r.status).toBe(201);
    }
    // 13 events (run.created, then the notes at seq 2..13): 12 × 900 KiB is past 8 MiB.
    const p1 = await d.kernel_(`/runs/${run_id}/events?limit=1000`);
    const seqs1 = p1.body.events.map((e: any) => e.seq);
    expect(seqs1[0]).toBe(1);
    expect(seqs1.length).toBeLessThan(13);
    expect(seqs1.length).toBeGreaterThanOrEqual(9); // 1 + 9 notes fit in 8 MiB
    expect(p1.body.next_seq).toBe(seqs1[seqs1.length - 1] + 1);
    const p2 = await d.kernel_(`/runs/${run_id}/events?from_seq=${p1.body.next_seq}&limit=1000`);
    expect([...seqs1, ...p2.body.events.map((e: any) => e.seq)]).toEqual(Array.from({ length: 13 }, (_, i) => i + 1));
    expect(p2.body.events.at(-1).payload).toEqual({ i: 11, big });
    // One event larger than the bound still comes, alone on its page.
    const one = await d.kernel_(`/runs/${run_id}/events?from_seq=13&limit=1`);
    expect(one.body.events.map((e: any) => e.seq)).toEqual([13]);

    const newest = await d.kernel!.runs.eventRange(run_id, 1, 14);
    expect(newest.at(-1)!.seq).toBe(13);
    expect(newest.length).toBe(seqs1.length - 1); // the same bytes, counted from the end (no small run.created among them)
    expect(newest.map((e) => e.seq)).toEqual(Array.from({ length: newest.length }, (_, i) => 14 - newest.length + i));
  });
});

describe('POST /runs/{id}/events (I 5.2, D §7, §10)', () => {
  it('accepts external kinds with an active lease of the run (X-Svc-Lease)', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    for (const kind of ['note', 'tool.called', 'tool.refused', 'model.called']) {
      const r = await d.kernel_(`/runs/${run_id}/events`, { body: { kind, payload: { what: kind }, actor: { worker_id: 'w-1' } }, headers: { 'x-svc-lease': l.body.lease_id } });
      expect(r.status, kind).toBe(201);
    }
    const events = await allEvents(d, run_id);
    expect(events.slice(-4).map((e) => [e.kind, e.payload.what, e.actor])).toEqual([
      ['note', 'note', { worker_id: 'w-1' }],
      ['tool.called', 'tool.called', { worker_id: 'w-1' }],
      ['tool.refused', 'tool.refused', { worker_id: 'w-1' }],
      ['model.called', 'model.called', { worker_id: 'w-1' }],
    ]);
    const metrics = (await d.kernel_('/metrics')).body as string;
    expect(metrics).toMatch(/^svc_events_total\{kind="note"\} 1$/m);
    expect(metrics).toMatch(/^svc_events_total\{kind="run.created"\} 1$/m);
    expect(metrics).toMatch(/^svc_events_total\{kind="step.leased"\} 1$/m);
  });

  it('refuses kernel kinds with 422 event_kind_not_external', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    for (const kind of ['run.completed', 'step.completed', 'approval.decided', 'whatever']) {
      const r = await d.kernel_(`/runs/${run_id}/events`, { body: { kind, payload: {} }, headers: { 'x-svc-lease': l.body.lease_id } });
      expect(r.status, kind).toBe(422);
      expect(r.body.error.code).toBe('event_kind_not_external');
    }
  });

  it('needs a credential: 401 credential_required without one, credential_invalid for a bad one', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const { run_id } = await startRun(d, bundleId);
    const other = await startRun(d, bundleId);
    const none = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {} } });
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('credential_required');

    const otherLease = await lease(d, ['model']); // the first run's step
    const mine = otherLease.body.run_id === run_id ? otherLease.body.lease_id : null;
    const theirs = await lease(d, ['model']);
    expect(mine).not.toBeNull();
    const cases: Array<Record<string, string>> = [
      { 'x-svc-lease': 'lse_nope' },
      { 'x-svc-lease': theirs.body.lease_id }, // a lease of another run
      { 'x-svc-remit': 'krt1.garbage' },
      { 'x-svc-remit': await d.kernel!.remits.tokenFor(other.remit_id) }, // another run's remit
      { 'x-svc-remit': (await mintRemit(d)).token }, // an unbound remit of nobody's run
    ];
    // D §10 "a bad one" is 401 also beside a good one, either way round.
    cases.push({ 'x-svc-lease': mine!, 'x-svc-remit': 'krt1.garbage' }, { 'x-svc-lease': 'lse_nope', 'x-svc-remit': await d.kernel!.remits.tokenFor((await getRun(d, run_id)).remit_id) });
    for (const headers of cases) {
      const r = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {} }, headers });
      expect(r.status, JSON.stringify(headers)).toBe(401);
      expect(r.body.error.code).toBe('credential_invalid');
    }
    // man/svc-events.7: an empty header is a bad one (said as empty), and so is one sent
    // twice, even with the good lease both times (it arrives as "id, id").
    const empty = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {} }, headers: { 'x-svc-lease': mine!, 'x-svc-remit': '' } });
    expect(empty.status).toBe(401);
    expect(empty.body.error).toEqual({ code: 'credential_invalid', message: 'X-Svc-Remit is empty', details: { header: 'X-Svc-Remit' } });
    const emptyLease = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {} }, headers: { 'x-svc-lease': '' } });
    expect(emptyLease.body.error).toEqual({ code: 'credential_invalid', message: 'X-Svc-Lease is empty', details: { header: 'X-Svc-Lease' } });
    const twice = new Headers({ 'content-type': 'application/json' });
    twice.append('x-svc-lease', mine!);
    twice.append('x-svc-lease', mine!);
    const doubled = await fetch(`${d.kernelUrl}/v1/runs/${run_id}/events`, { method: 'POST', headers: twice, body: JSON.stringify({ kind: 'note', payload: {} }) });
    expect(doubled.status).toBe(401);
    expect(((await doubled.json()) as any).error).toMatchObject({ code: 'credential_invalid', details: { header: 'X-Svc-Lease' } });
    const both = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {} }, headers: { 'x-svc-lease': mine!, 'x-svc-remit': otherLease.body.context.remit_token } });
    expect(both.status).toBe(201); // two good ones
    // a lease that ended no longer counts
    await d.kernel_(`/leases/${mine}/complete`, { body: { output: { amount: 1 } } });
    const ended = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {} }, headers: { 'x-svc-lease': mine! } });
    expect(ended.body.error.code).toBe('credential_invalid');
  });

  it('accepts the run-bound remit token (X-Svc-Remit) and tool.refused with the bearer alone (D §7)', async () => {
    await using d = await startRunDaemon({}, 'kernel-bearer-123');
    const { run_id } = await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    const ok = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'model.called', payload: { tokens: 5 } }, headers: { 'x-svc-remit': l.body.context.remit_token } });
    expect(ok.status).toBe(201);
    const refused = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'tool.refused', payload: { reason: 'signature_invalid' }, actor: { service: 'gateway' } } });
    expect(refused.status).toBe(201);
    // The bearer stands in for the headers only for tool.refused.
    const note = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {} } });
    expect(note.status).toBe(401);
    expect(note.body.error.code).toBe('credential_required');
  });

  it('without a configured token there is no bearer: tool.refused needs a header like any kind (I 5.2)', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    for (const headers of [{}, { authorization: 'Bearer anything' }] as Array<Record<string, string>>) {
      const r = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'tool.refused', payload: {}, actor: {} }, headers });
      expect(r.status, JSON.stringify(headers)).toBe(401);
      expect(r.body.error.code).toBe('credential_required');
    }
    const l = await lease(d, ['model']);
    const withLease = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'tool.refused', payload: {}, actor: {} }, headers: { 'x-svc-lease': l.body.lease_id } });
    expect(withLease.status).toBe(201);
    expect((await allEvents(d, run_id)).filter((e: any) => e.kind === 'tool.refused')).toHaveLength(1);
  });

  it('validates the body and the run: 400 request_invalid, 404 not_found', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    const h = { 'x-svc-lease': l.body.lease_id };
    const actors = [5, true, [], '', 'kernel', { id: 7, role: 'ops' }, { id: 'ops-1', role: '' }, { worker_id: null }].map((actor) => ({ kind: 'note', payload: {}, actor }));
    for (const body of [{}, { kind: 5 }, { kind: 'note', payload: [1] }, { kind: 'note', payload: 'x' }, ...actors]) {
      const r = await d.kernel_(`/runs/${run_id}/events`, { body, headers: h });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe('request_invalid');
    }
    // Each refused actor is named for what is wrong with it, not as "must be object".
    const said = async (actor: unknown) => (await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {}, actor }, headers: h })).body.error;
    expect(await said('kernel')).toMatchObject({ message: expect.stringContaining('reserved'), details: { path: '/actor' } });
    expect(await said('')).toMatchObject({ message: '/actor must not be empty', details: { path: '/actor' } });
    expect(await said('x'.repeat(257))).toMatchObject({ message: '/actor must be at most 256 characters', details: { path: '/actor' } });
    expect((await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {}, actor: 'x'.repeat(256) }, headers: h })).status).toBe(201);
    expect(await said({ id: 7, role: 'ops' })).toMatchObject({ message: '/actor/id must be a non-empty string', details: { path: '/actor/id' } });
    expect((await said(5)).message).toBe('/actor must be an object ({id, role} or {worker_id}), a name, or null');
    expect(await said({ id: 'ops\u202e1', role: 'ops' })).toMatchObject({ details: { path: '/actor/id' } });
    expect(await said('bot\u200b')).toMatchObject({ details: { path: '/actor' } });
    expect((await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'x', actor: 'kernel' } })).body.error.message).toContain('reserved');
    // The actor is an object, a name, or absent (null): man/svc-events.7.
    for (const [actor, stored] of [[{ id: 'w-1', role: 'worker', host: 'a' }, { id: 'w-1', role: 'worker', host: 'a' }], ['svc-bot', 'svc-bot'], [undefined, null]] as const) {
      const r = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: {}, actor }, headers: h });
      expect(r.status).toBe(201);
      expect((await allEvents(d, run_id)).find((e) => e.seq === r.body.seq).actor).toEqual(stored);
    }
    const nf = await d.kernel_('/runs/run_nope/events', { body: { kind: 'note', payload: {} }, headers: h });
    expect(nf.status).toBe(404);
    expect(nf.body.error.details).toEqual({ resource: 'run', id: 'run_nope' });
  });

  it('appendExternalEvent is the in-process path the gateway uses (no header, kinds still checked)', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const r = await d.kernel!.runs.appendExternalEvent(run_id, { kind: 'tool.refused', payload: { reason: 'tool_not_in_remit', tool: 'crm.export' }, actor: { service: 'gateway' } });
    expect(r.seq).toBe(2);
    const events = await allEvents(d, run_id);
    expect(events[1]).toMatchObject({ seq: 2, hash: r.hash, kind: 'tool.refused', payload: { reason: 'tool_not_in_remit' } });
    await expect(d.kernel!.runs.appendExternalEvent(run_id, { kind: 'run.completed', payload: {}, actor: null })).rejects.toMatchObject({ code: 'event_kind_not_external' });
    await expect(d.kernel!.runs.appendExternalEvent('run_nope', { kind: 'note', payload: {}, actor: null })).rejects.toMatchObject({ code: 'not_found' });
  });
});

/**
 * Unknown members of a kernel request body are ignored, not refused (decisions §10 lists
 * what is a 400: non-JSON, wrong types, missing fields). Remit bodies are the exception:
 * a misspelt narrowing field would silently inherit the parent's wider value, so remits
 * refuse unknown members (docs/design.md, "Request bodies").
 */
import { describe, expect, it } from 'vitest';
import { lease, pushBundle, startRun, startRunDaemon } from './run-fixtures.js';

describe('unknown body members (D §10)', () => {
  it('are ignored on runs, leases, events and policies', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model'], { extra_hint: true });
    expect(l.status).toBe(200);
    const ev = await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: { text: 'hi' }, actor: null, trace_id: 'abc' }, headers: { 'x-svc-lease': l.body.lease_id } });
    expect(ev.status).toBe(201);
    const pol = await d.kernel_('/policies', { body: { name: 'lenient', version: '1', source: 'allow a when true', description: 'ignored' } });
    expect(pol.status).toBe(201);
  });

  it('are refused on remit bodies, where ignoring one could widen a grant', async () => {
    await using d = await startRunDaemon();
    const res = await d.kernel_('/remits', {
      body: { tools: ['a.*'], scope: ['sql:table:x'], scopes: ['sql:table:*'], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'observe', requested_by: { id: 'a', role: 'b', manager: 'c' } },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.details.path).toBe('/scope');
  });
});

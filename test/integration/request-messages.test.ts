/**
 * What a refused request says (decisions §10: 400 request_invalid with details.path). The
 * code and path are the contract; these pin the words, so a client's user reads what is wrong
 * with the request rather than a schema library's phrasing of it.
 */
import { describe, expect, it } from 'vitest';
import { pushBundle, startRun, startRunDaemon } from './run-fixtures.js';

describe('request_invalid messages (D §10)', () => {
  it('query integers: out of range is said as a range, a repeated parameter as repeated', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const negative = await d.kernel_(`/runs/${run_id}/events?from_seq=-1`);
    expect(negative.status).toBe(400);
    expect(negative.body.error).toMatchObject({ code: 'request_invalid', message: expect.stringMatching(/^from_seq must be between 0 and \d+$/), details: { path: '/querystring/from_seq' } });
    const twice = await d.kernel_('/runs?limit=1&limit=2');
    expect(twice.body.error).toMatchObject({ code: 'request_invalid', message: 'limit must be given once', details: { path: '/querystring/limit' } });
    expect((await d.kernel_('/runs?limit=ten')).body.error.message).toBe('limit must be an integer');
    expect((await d.kernel_('/runs?limit=0')).body.error.message).toBe('limit must be between 1 and 500');
    // String parameters: repeated, or too long, each said as what it is.
    expect((await d.kernel_('/runs?department=a&department=b')).body.error).toMatchObject({ message: 'department must be given once, as a string', details: { path: '/querystring/department' } });
    expect((await d.kernel_(`/runs?department=${'d'.repeat(513)}`)).body.error).toMatchObject({ message: 'department is longer than 512 characters', details: { path: '/querystring/department' } });
  });

  it('a trailing slash names the same resource: /runs/ is the list, not run ""', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const list = await d.kernel_('/runs/');
    expect(list.status).toBe(200);
    expect(list.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([run_id]);
    expect((await d.kernel_(`/runs/${run_id}/`)).body.run_id).toBe(run_id);
    // …and for a method the path does not take: 405 either way.
    for (const path of ['/runs', '/runs/']) {
      const r = await d.kernel_(path, { method: 'DELETE' });
      expect(r.status, path).toBe(405);
      expect(r.body.error.code).toBe('method_not_allowed');
    }
  });

  it('a 404 quotes at most 256 characters of an unknown id in its message; details.id holds it whole', async () => {
    await using d = await startRunDaemon();
    const id = `run_${'x'.repeat(5000)}`;
    const r = await d.kernel_(`/runs/${id}`);
    expect(r.status).toBe(404);
    expect(r.body.error.message).toBe(`run ${id.slice(0, 256)}… not found`);
    expect(r.body.error.details).toEqual({ resource: 'run', id });
  });

  it('bodies: a missing member "is required", an enum lists its values, a body that is no object says so', async () => {
    await using d = await startRunDaemon();
    const missing = await d.kernel_('/leases', { body: { kinds: ['model'] } });
    expect(missing.body.error).toMatchObject({ code: 'request_invalid', message: '/worker_id is required', details: { path: '/worker_id' } });
    const kinds = await d.kernel_('/leases', { body: { worker_id: 'w', kinds: ['modle'] } });
    expect(kinds.body.error).toMatchObject({ message: '/kinds/0 must be one of "model", "tool", "action", "compensation"', details: { path: '/kinds/0' } });
    // A content coding is refused, whether the body is compressed or only labelled so.
    const { gzipSync } = await import('node:zlib');
    for (const [body, coding] of [[gzipSync('{"worker_id":"w","kinds":["model"]}'), 'gzip'], ['{"worker_id":"w","kinds":["model"]}', 'gzip'], ['{"worker_id":"w","kinds":["model"]}', 'br']] as const) {
      const res = await fetch(`${d.kernelUrl}/v1/leases`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': coding }, body });
      expect(res.status, coding).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: 'request_invalid', message: `Content-Encoding "${coding}" is not supported: send the body uncompressed`, details: { path: '' } });
    }
    for (const coding of ['identity', 'Identity, identity', '']) {
      const identity = await fetch(`${d.kernelUrl}/v1/leases`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': coding }, body: '{"worker_id":"w","kinds":["model"],"wait_seconds":0}' });
      expect(identity.status, coding).toBe(204);
    }
    for (const body of ['[]', '"x"', '7']) {
      const r = await d.kernel_('/leases', { body });
      expect(r.status, body).toBe(400);
      expect(r.body.error, body).toMatchObject({ code: 'request_invalid', message: 'request body must be a JSON object', details: { path: '' } });
    }
  });

  it('one situation, one wording, whichever route refuses it (src/encoding/schema-message.ts)', async () => {
    await using d = await startRunDaemon();
    const remit = { tools: ['a.b'], scopes: ['a:b:c'], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'observe', policy_set: [], requested_by: { id: 'a', role: 'b', manager: 'c' } };
    const said = async (path: string, body: unknown) => (await d.kernel_(path, { body })).body.error;
    // An unknown member where one is refused (remits): the words run input uses for one.
    expect(await said('/remits', { ...remit, scope: ['x'] })).toMatchObject({ message: '/scope is not allowed', details: { path: '/scope' } });
    // An enum lists its values quoted, as on leases; an empty string is "empty", not ajv's "fewer than 1 characters".
    expect((await said('/remits', { ...remit, autonomy: 'max' })).message).toBe('/autonomy must be one of "observe", "propose", "supervised", "autonomous"');
    expect((await said('/remits', { ...remit, requested_by: { id: 'a', role: '', manager: 'c' } })).message).toBe('/requested_by/role must not be empty');
    // A type is said with its article, wherever it is checked.
    expect((await said('/remits', { ...remit, spend: { tokens: 1.5, usd: 1 } })).message).toBe('/spend/tokens must be an integer');
    expect((await said('/leases', { worker_id: 'w', kinds: 'model' })).message).toBe('/kinds must be an array');
    expect((await said('/policies/test', { policy_a: 'refunds', policy_b: { source: 'allow a when true' }, corpus: [] })).message).toBe('/policy_a must be an object');
  });
});

describe('keep-alive connections (daemon/http/common.ts)', () => {
  it('requests refused before their body was read leave no listener behind on the connection', async () => {
    await using d = await startRunDaemon();
    const { request, Agent } = await import('node:http');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    const url = new URL(d.kernelUrl!);
    try {
      for (let i = 0; i < 30; i++) {
        // An unknown lease is 404 before its body is parsed (known-ids.ts): the body is left unread.
        const status = await new Promise<number>((resolve, reject) => {
          const req = request({ host: url.hostname, port: url.port, path: `/v1/leases/lse_nope${i}/complete`, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          });
          req.on('error', reject);
          req.end(JSON.stringify({ output: { pad: 'x'.repeat(2000) } }));
        });
        expect(status).toBe(404);
      }
      await new Promise((r) => setTimeout(r, 50));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
      agent.destroy();
    }
  });
});

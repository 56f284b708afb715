/**
 * svc(1) run resume and svc-approvals(1) approve: a run whose remit has expired gets a warning,
 * since the gateway refuses its tool calls (interface 5.3 step 3, remit_expired) and a remit is
 * never extended (decisions §3), so resuming or approving cannot get it further. Against a small
 * kernel stand-in that answers the three requests each command makes.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { runSvc } from '../helpers/cli.js';

let server: Server | null = null;
afterEach(() => server?.close());

/** A kernel whose run run_1 is bound to remit rmt_1, which ends at `exp` (epoch seconds). */
async function kernel(exp: number): Promise<string> {
  server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    req.resume();
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/runs/run_1/resume') return send(200, { run_id: 'run_1', state: 'running' });
      if (req.method === 'POST' && req.url === '/v1/approvals/apr_1') return send(200, { approval_id: 'apr_1', state: 'approved', run_id: 'run_1', run_state: 'running' });
      if (req.method === 'GET' && req.url === '/v1/runs/run_1') return send(200, { run_id: 'run_1', state: 'running', remit_id: 'rmt_1' });
      if (req.method === 'GET' && req.url === '/v1/remits/rmt_1') return send(200, { rid: 'rmt_1', exp, nbf: exp - 60, iat: exp - 60, parent_id: null, run_id: 'run_1' });
      send(404, { error: { code: 'not_found', message: `${req.method} ${req.url}`, details: {} } });
    });
  });
  await new Promise<void>((ok) => server!.listen(0, '127.0.0.1', ok));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

const now = () => Math.floor(Date.now() / 1000);

describe('a run whose remit has expired: resume and approve say it cannot get further', () => {
  it('svc run resume warns, naming the remit, when it ended; not while it is valid', async () => {
    const env = { SVC_KERNEL_URL: await kernel(now() - 5), SVC_ACTOR: 'ops-1:ops' };
    const r = await runSvc(['run', 'resume', 'run_1'], env);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('run run_1 running\n');
    expect(r.stderr).toMatch(/^svc: warning: run run_1's remit rmt_1 expired at \S+Z: the gateway refuses the run's tool calls \(remit_expired\).*abandon the run \(svc run abandon run_1\) and start it again with a new remit\n$/);
    server!.close();
    const valid = await runSvc(['run', 'resume', 'run_1'], { ...env, SVC_KERNEL_URL: await kernel(now() + 3600) });
    expect(valid.code).toBe(0);
    expect(valid.stderr).toBe('');
  });

  it('svc approvals approve warns the same way, after recording the decision', async () => {
    const r = await runSvc(['approvals', 'approve', 'apr_1', '--actor', 'fin-1:finance'], { SVC_KERNEL_URL: await kernel(now() - 5) });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('approved apr_1; run run_1 is running\n');
    expect(r.stderr).toContain("svc: warning: run run_1's remit rmt_1 expired at ");
  });
});

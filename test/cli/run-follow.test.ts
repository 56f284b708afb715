/**
 * svc run events --follow (svc(1)): "keeps printing new events until the run is completed,
 * failed or abandoned" — through an svcd restart too, as the inbox and the worker ride one
 * out. A stand-in svcd answers the two routes a follow reads, goes away, and comes back.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runSvc } from '../helpers/cli.js';

const event = (seq: number, kind: string) => ({ seq, kind, run_id: 'run_F', payload: {}, actor: 'kernel', at: '2026-01-01T10:00:00.000Z', hash: 'h', prev_hash: '' });

describe('svc run events --follow (svc(1))', () => {
  it('rides out an svcd that goes away and comes back, then stops at the run\'s end (exit 0)', async () => {
    let state = 'running';
    let events = [event(1, 'run.created')];
    let served = 0;
    const serve = (port: number) =>
      new Promise<Server>((resolve) => {
        const s = createServer((req, res) => {
          served++;
          const url = new URL(req.url!, 'http://x');
          const body =
            url.pathname === '/v1/runs/run_F/events'
              ? { events: events.filter((e) => e.seq >= Number(url.searchParams.get('from_seq') ?? 1)), next_seq: events.length + 1 }
              : { run_id: 'run_F', state };
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        });
        s.listen(port, '127.0.0.1', () => resolve(s));
      });
    let server = await serve(0);
    const port = (server.address() as AddressInfo).port;
    const following = runSvc(['run', 'events', 'run_F', '--follow', '--interval', '50', '--kernel-url', `http://127.0.0.1:${port}`]);
    // The follow has had its first answers (a slow start under load must not find svcd gone
    // before it ever answered: that is the "never reached" case below).
    for (const end = Date.now() + 15_000; served < 3 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    expect(served).toBeGreaterThanOrEqual(3);
    server.closeAllConnections();
    await new Promise((r) => server.close(r)); // svcd restarting: nothing listens
    await new Promise((r) => setTimeout(r, 700));
    events = [...events, event(2, 'step.leased'), event(3, 'run.completed')];
    state = 'completed';
    server = await serve(port);
    try {
      const r = await following;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/run\.created[\s\S]*step\.leased[\s\S]*run\.completed/);
      expect(r.stderr).toContain('still following, asking again');
      expect(r.stderr).toContain('answers again');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('an svcd never reached is exit 3 at once, with --follow too (a wrong address is not waited for)', async () => {
    for (const extra of [[], ['--follow']]) {
      const r = await runSvc(['run', 'events', 'run_F', '--kernel-url', 'http://127.0.0.1:2', ...extra]);
      expect(r.code, extra.join(' ')).toBe(3);
      expect(r.stderr).not.toContain('still following');
    }
  });

  it('reads on past a page svcd stopped short of its limit (D §7 next_seq; pages are bounded in bytes too)', async () => {
    const events = Array.from({ length: 5 }, (_, i) => event(i + 1, i === 4 ? 'run.completed' : 'note'));
    const server = createServer((req, res) => {
      const url = new URL(req.url!, 'http://x');
      const from = Number(url.searchParams.get('from_seq') ?? 1);
      const page = events.filter((e) => e.seq >= from).slice(0, 2); // whatever the limit
      const body = url.pathname === '/v1/runs/run_F/events' ? { events: page, next_seq: page.length ? page.at(-1)!.seq + 1 : from } : { run_id: 'run_F', state: 'completed' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      for (const extra of [[], ['--follow', '--interval', '50']]) {
        const r = await runSvc(['run', 'events', 'run_F', '--json', '--kernel-url', url, ...extra]);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l).seq), extra.join(' ')).toEqual([1, 2, 3, 4, 5]);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

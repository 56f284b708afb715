// The README's `npm start` (quickstart/main.ts, built) as a real process: the parked run and the
// next step within 10 seconds, the approval through the built `svc`, the completed run, a valid
// replay, and a clean Ctrl-C. Interface 3 (approval rows), 4.1; issue 7 "Done when".
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runSvc } from '../helpers/cli.js';
import { ROOT, tempDir } from '../helpers/daemon.js';
import { events, ok } from './helpers.js';

describe('e2e: the quickstart demo flow', () => {
  it('--help lists every flag the README names with its default; an unknown flag is exit 2', async () => {
    const { execFileSync, spawnSync } = await import('node:child_process');
    const help = execFileSync(process.execPath, [join(ROOT, 'dist/quickstart/main.js'), '--help'], { encoding: 'utf8' });
    for (const text of ['--data-dir DIR', '(default: ./.demo)', '--kernel-listen HOST:PORT', '127.0.0.1:7401', '--gateway-listen HOST:PORT', '127.0.0.1:7402', '--json']) {
      expect(help).toContain(text);
    }
    const bad = spawnSync(process.execPath, [join(ROOT, 'dist/quickstart/main.js'), '--bogus'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toBe('quickstart: unknown flag --bogus\n');
  });

  it('parks for finance within 10 s, completes after `svc approvals approve`, replays, and stops on SIGINT', { timeout: 60_000 }, async () => {
    const dir = tempDir('svc-quickstart-');
    const t0 = Date.now();
    const child = spawn(process.execPath, [join(ROOT, 'dist/quickstart/main.js'), '--json', '--data-dir', join(dir, 'demo'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const lines: any[] = [];
    const waiters: Array<() => void> = [];
    createInterface({ input: child.stdout }).on('line', (l) => {
      lines.push(JSON.parse(l));
      waiters.splice(0).forEach((f) => f());
    });
    const next = async (type: string, ms: number) => {
      const end = Date.now() + ms;
      for (;;) {
        const found = lines.find((l) => l.type === type);
        if (found) return found;
        if (Date.now() > end || child.exitCode !== null) throw new Error(`no "${type}" line; got ${JSON.stringify(lines)}\n${stderr}`);
        await new Promise<void>((r) => {
          const t = setTimeout(r, 200);
          waiters.push(() => {
            clearTimeout(t);
            r();
          });
        });
      }
    };
    try {
      const started = await next('started', 10_000);
      const parked = await next('parked', 10_000);
      expect(Date.now() - t0).toBeLessThan(10_000);
      const nextStep = await next('next', 5_000);
      expect(nextStep.text).toContain(`SVC_KERNEL_URL=${started.kernel} SVC_GATEWAY_URL=${started.gateway} npx svc approvals --actor fin-1:finance`);
      expect(parked.text).toContain('role:finance');

      const approve = await runSvc(['approvals', 'approve', parked.approval_id, '--actor', 'fin-1:finance', '--reason', 'duplicate charge'], { SVC_KERNEL_URL: started.kernel });
      expect(approve.code, approve.stderr).toBe(0);
      const completed = await next('completed', 15_000);
      expect(completed.run_id).toBe(parked.run_id);
      expect(completed.output).toMatchObject({ invoice_id: 'inv_1001', amount: 180, status: 'issued' });

      const db = new Database(join(dir, 'demo', 'billing.db'), { readonly: true });
      expect(db.prepare(`SELECT COUNT(*) AS n FROM refunds WHERE invoice_id = 'inv_1001'`).get()).toEqual({ n: 1 });
      db.close();
      const replay = await ok(started.kernel, 'POST', `/runs/${parked.run_id}/replay`);
      expect(replay).toMatchObject({ chain_valid: true, state_matches: true });
      const log = await events(started.kernel, parked.run_id);
      expect(log.filter((e) => e.kind === 'note' && e.payload.type === 'redaction').length).toBeGreaterThan(0);
      expect(JSON.stringify(log.filter((e) => e.kind === 'note' || e.kind === 'model.called'))).not.toContain('dana.whitfield@example.com');

      child.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(lines.at(-1)).toMatchObject({ type: 'stopped' });
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

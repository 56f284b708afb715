/**
 * `svc run` against a live svcd (interface 4.1; decisions §6, §7, §11): the built binary, its
 * output with and without --json, and its exit codes (0 ok, 1 failed or does not check out,
 * 2 usage, 3 unreachable). Needs `npx tsc -p tsconfig.json` first.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { NO_DAEMON, runSvc } from '../helpers/cli.js';
import { ROOT, tempDir } from '../helpers/daemon.js';
import { getRun, lease, leaseAndComplete, mintRemit, propose, pushBundle, refundsBundle, runToAction, sleep, startRun, startRunDaemon } from './run-fixtures.js';

describe('svc run (D §11)', () => {
  it('start, show, list, events, replay, abandon, resume', async () => {
    await using d = await startRunDaemon();
    const env = { SVC_KERNEL_URL: d.kernelUrl! };
    await pushBundle(d);
    const remit = await mintRemit(d);
    const inputFile = join(tempDir(), 'input.json');
    writeFileSync(inputFile, JSON.stringify({ invoice_id: 'inv-42', ticket: 'refund me' }));

    const start = await runSvc(['run', 'start', 'refunds', 'refund', '--input', `@${inputFile}`, '--remit', remit.remit_id], env);
    expect(start.code, start.stderr).toBe(0);
    const runId = start.stdout.trim();
    expect(runId).toMatch(/^run_/);
    expect((await getRun(d, runId)).input).toEqual({ invoice_id: 'inv-42', ticket: 'refund me' });

    await leaseAndComplete(d, { amount: 12 }, { tokens: 250, usd: 0.5 });
    const l = await lease(d, ['tool']);
    await d.kernel_(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'bad_rows', message: 'no such invoice' }, deterministic: true } });

    const show = await runSvc(['run', 'show', runId], env);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/state\s+parked \(quarantine\)/);
    expect(show.stdout).toMatch(/tokens\s+250 of 100000 tokens \(0%\)/);
    expect(show.stdout).toMatch(/usd\s+0\.5 of 5 USD \(10%\)/);
    expect(show.stdout).toMatch(/triage\s+completed\s+1/);
    expect(show.stdout).toMatch(/lookup \*\s+quarantined\s+1 .*bad_rows: no such invoice/);
    // What the on-call does next (svc(1) svc run show), on standard error.
    expect(show.stderr).toBe(`svc: next: fix what the step's error says, then svc run resume ${runId} --actor ID:ROLE; or svc run abandon ${runId} --reason TEXT --actor ID:ROLE\n`);
    const showJson = await runSvc(['--json', 'run', 'show', runId], env);
    expect(JSON.parse(showJson.stdout)).toEqual(await getRun(d, runId));

    const list = await runSvc(['run', 'list', '--state', 'parked'], env);
    expect(list.stdout).toContain(runId);
    expect(list.stdout).toMatch(/RUN\s+STATE/);
    const listJson = JSON.parse((await runSvc(['--json', 'run', 'list'], env)).stdout);
    expect(listJson.runs.map((r: any) => r.run_id)).toEqual([runId]);
    expect(listJson.next).toBeNull();

    const events = await runSvc(['--json', 'run', 'events', runId], env);
    const lines = events.stdout.trim().split('\n').map((x) => JSON.parse(x));
    expect(lines.map((e) => e.kind)).toEqual(['run.created', 'step.leased', 'step.completed', 'step.leased', 'step.failed', 'step.quarantined', 'run.parked']);
    expect(lines.every((e) => e.type === 'event' && e.run_id === runId)).toBe(true);
    const human = await runSvc(['run', 'events', runId, '--from-seq', '5'], env);
    expect(human.stdout.trim().split('\n')).toHaveLength(3);
    expect(human.stdout).toMatch(/^\s+5 .*step\.failed .*step=lookup attempt=1 error=bad_rows/m);

    const replay = await runSvc(['run', 'replay', runId], env);
    expect(replay.code).toBe(0);
    expect(replay.stdout).toContain('replay: everything checks out');
    expect(replay.stdout).toMatch(/^signed head\s+yes \(seq 7\)$/m); // D §7: the head after the last event

    const resume = await runSvc(['--actor', 'ops-1:ops', 'run', 'resume', runId], env);
    expect(resume.code).toBe(0);
    expect(resume.stdout.trim()).toBe(`run ${runId} running`);
    expect((await runSvc(['--actor', 'ops-1:ops', 'run', 'resume', runId], env)).code).toBe(1); // not parked: 409 invalid_state
    // An operator's action names its operator: no actor is a usage error, and nothing is sent.
    const anonymous = await runSvc(['run', 'resume', runId], { ...env, SVC_ACTOR: '' });
    expect(anonymous.code).toBe(2);
    expect(anonymous.stderr).toContain('an actor is required: pass --actor ID:ROLE or set SVC_ACTOR');

    const ab = await runSvc(['--json', '--actor', 'ops-1:ops', 'run', 'abandon', runId, '--reason', 'wrong invoice'], env);
    expect(ab.code).toBe(0);
    expect(JSON.parse(ab.stdout)).toMatchObject({ compensations_scheduled: 0, state: 'abandoned' });
    const followed = await runSvc(['run', 'events', runId, '--follow', '--from-seq', '8'], env);
    expect(followed.code).toBe(0);
    expect(followed.stdout).toMatch(/run\.resumed[\s\S]*run\.abandon_requested[\s\S]*run\.abandoned/);
    expect(followed.stdout).toMatch(/run\.abandon_requested\s+ops-1:ops /);
  });

  // A remit that leaves out a tool the workflow's steps call lets the run start, write in its
  // earlier steps, and quarantine the step that calls it (tool_not_in_remit); the bound remit
  // cannot be widened (interface 5.3), so the run can only be abandoned. Said at start.
  it('run start warns of a step tool the remit does not grant, or a declared write under propose (I 5.3)', async () => {
    await using d = await startRunDaemon();
    const env = { SVC_KERNEL_URL: d.kernelUrl! };
    await pushBundle(d);
    const mint = async (tools: string[], autonomy: string) =>
      (await d.kernel_('/remits', { body: { tools, scopes: ['sql:table:*'], grants: [], spend: { tokens: 1000, usd: 1 }, autonomy, requested_by: { id: 'ana', role: 'agent', manager: 'finance' } } })).body.remit_id as string;
    const narrow = await mint(['billing.lookup', 'billing.refund'], 'supervised');
    const start = await runSvc(['run', 'start', 'refunds', 'refund', '--input', '{"invoice_id":"inv-1"}', '--remit', narrow], env);
    expect(start.code, start.stderr).toBe(0);
    const runId = start.stdout.trim();
    expect(start.stderr.trim().split('\n')).toEqual([
      `svc: warning: run ${runId}: step refund compensates with billing.void_refund, which remit ${narrow} does not grant (its tools: billing.lookup, billing.refund): the gateway will refuse it (tool_not_in_remit) when the run is abandoned after step refund completed, so that compensation fails for good (compensation_failed) and the step's write stays; a remit cannot be widened once a run binds it, so abandon this run and start it with a remit that grants the tool`,
      `run ${runId} running`,
    ]);
    const propose = await mint(['billing.*'], 'propose');
    const p = await runSvc(['run', 'start', 'refunds', 'refund', '--input', '{"invoice_id":"inv-1"}', '--remit', propose], env);
    expect(p.code, p.stderr).toBe(0);
    expect(p.stderr).toContain(`step refund calls billing.refund, which the bundle declares as writing, and remit ${propose} has autonomy propose: the gateway will refuse it (autonomy_too_low)`);
    // A remit that covers the workflow: nothing to say.
    const whole = await mint(['billing.*'], 'supervised');
    const ok = await runSvc(['run', 'start', 'refunds', 'refund', '--input', '{"invoice_id":"inv-1"}', '--remit', whole], env);
    expect(ok.stderr).not.toContain('warning');
  });

  it('run abandon warns about the writes of a step that never completed (docs/design.md Abandon)', async () => {
    await using d = await startRunDaemon();
    const env = { SVC_KERNEL_URL: d.kernelUrl! };
    const { run_id, lease: l } = await runToAction(d, { amount: 50 });
    expect((await propose(d, l.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 50 } })).body.decision).toBe('allow');
    expect((await runSvc(['run', 'abandon', run_id, '--reason', 'wrong invoice'], { ...env, SVC_ACTOR: '' })).code).toBe(2); // no actor
    const ab = await runSvc(['run', 'abandon', run_id, '--reason', 'wrong invoice'], { ...env, SVC_ACTOR: 'ops-1:ops' });
    expect(ab.code, ab.stderr).toBe(0);
    expect(ab.stdout.trim().split('\n')).toEqual([
      `run ${run_id} abandoned: 0 compensation(s) scheduled`,
      '1 write(s) of steps that never completed are not compensated; check them by hand:',
      expect.stringMatching(/^  step refund: billing\.refund \(event \d+, action\.decided\)$/), // the gateway never ran it
    ]);
  });

  // Compensations call the gateway with the run's remit (docs/design.md "A run outlives its
  // remit's exp only on paper"): abandoned after it expired, each is refused remit_expired and
  // fails for good, and the abandon itself said nothing of it.
  it('run abandon warns when the run\'s remit has expired: its compensations will be refused (D §6; docs/design.md Runs)', async () => {
    await using d = await startRunDaemon();
    const env = { SVC_KERNEL_URL: d.kernelUrl!, SVC_ACTOR: 'ops-1:ops' };
    const b = refundsBundle();
    b.tools!['billing.unlookup'] = { writes: true };
    b.workflows.refund!.steps[1]!.compensate = { tool: 'billing.unlookup', args: { invoice_id: '{{input.invoice_id}}' } };
    const bundleId = await pushBundle(d, b);
    const toLookup = async (ttl_seconds: number) => {
      const { run_id, remit_id } = await startRun(d, bundleId, { autonomy: 'autonomous', ttl_seconds });
      await leaseAndComplete(d, { amount: 20 });
      await leaseAndComplete(d, { rows: 1 });
      return { run_id, remit_id };
    };
    const live = await toLookup(3600);
    const quiet = await runSvc(['run', 'abandon', live.run_id, '--reason', 'r'], env);
    expect(quiet.code, quiet.stderr).toBe(0);
    expect(quiet.stdout).toContain('1 compensation(s) scheduled');
    expect(quiet.stderr).toBe('');

    const expired = await toLookup(1);
    await sleep(2100);
    const ab = await runSvc(['run', 'abandon', expired.run_id, '--reason', 'r'], env);
    expect(ab.code, ab.stderr).toBe(0);
    expect(ab.stdout).toContain('1 compensation(s) scheduled');
    expect(ab.stderr).toMatch(new RegExp(`^svc: warning: run ${expired.run_id}: its remit ${expired.remit_id} expired at \\S+, and the gateway refuses every call of the run \\(remit_expired\\), its compensations too: each fails for good \\(compensation_failed\\)`));
    // --json keeps standard output the kernel's answer; the note stays on standard error
    const json = await runSvc(['--json', 'run', 'abandon', expired.run_id, '--reason', 'again'], env);
    expect(JSON.parse(json.stdout)).toMatchObject({ compensations_scheduled: 1, state: 'abandoning' });
  });

  it('run replay exits 1 when the log was tampered with; usage errors exit 2; no daemon exits 3', async () => {
    await using d = await startRunDaemon();
    const env = { SVC_KERNEL_URL: d.kernelUrl! };
    const bundleId = await pushBundle(d);
    const remit = await mintRemit(d);
    const start = await runSvc(['--json', 'run', 'start', bundleId, 'refund', '--input', '{"invoice_id":"inv-1"}', '--remit', remit.remit_id, '--requested-by', 'ana:agent:finance'], env);
    const runId = JSON.parse(start.stdout).run_id;
    await leaseAndComplete(d, { amount: 1 });
    const db = new Database(join(d.dataDir, 'kernel.db'));
    db.prepare('DELETE FROM run_events WHERE run_id = ? AND seq = 3').run(runId);
    db.close();
    const replay = await runSvc(['run', 'replay', runId], env);
    expect(replay.code).toBe(1);
    expect(replay.stdout).toMatch(/chain valid\s+NO/);
    expect(replay.stdout).toMatch(/^signed head\s+NO \(head_mismatch\)$/m);
    expect(replay.stdout).toMatch(/seq 3: head_mismatch/);
    expect(replay.stderr).toContain('does not check out');

    expect((await runSvc(['run', 'start', bundleId, 'refund', '--input', '{nope', '--remit', remit.remit_id], env)).code).toBe(2);
    expect((await runSvc(['run', 'start', bundleId, 'refund'], env)).code).toBe(2); // --remit is required
    expect((await runSvc(['run', 'abandon', runId], env)).code).toBe(2); // --reason is required
    const bad = await runSvc(['run', 'start', bundleId, 'refund', '--input', '{"invoice_id":5}', '--remit', (await mintRemit(d)).remit_id], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('input_invalid');
    expect((await runSvc(['run', 'show', 'run_nope'], env)).code).toBe(1);
    expect((await runSvc(['run', 'list'], { SVC_KERNEL_URL: NO_DAEMON })).code).toBe(3);
  });

  it('as a newcomer uses it: a closed pipe ends quietly, the next-page hint keeps the filters, --follow stops at failed, a /v1 URL works', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const runs: Array<{ run_id: string }> = [];
    for (let i = 0; i < 3; i++) runs.push(await startRun(d, bundleId, { spend: { tokens: 5, usd: 5 } }));
    const env = { SVC_KERNEL_URL: `${d.kernelUrl!}/v1/` };

    // `svc run events RUN | head -1` on a log longer than a pipe's buffer.
    for (let i = 0; i < 1200; i++) await d.kernel!.runs.appendExternalEvent(runs[0]!.run_id, { kind: 'note', payload: { i, text: 'x'.repeat(64) }, actor: null });
    const piped = await new Promise<{ code: number | null; stderr: string; first: string }>((resolve) => {
      const child = spawn(process.execPath, [join(ROOT, 'dist/cli/index.js'), 'run', 'events', runs[0]!.run_id], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      let first = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      child.stdout.once('data', (b: Buffer) => {
        first = b.toString().split('\n')[0]!;
        child.stdout.destroy(); // what head does after its first line
      });
      child.on('exit', (code) => resolve({ code, stderr, first }));
    });
    expect(piped.first).toMatch(/^\s*1\s.*run\.created/);
    expect(piped.stderr).toBe('');
    expect(piped.code).toBe(0);

    const page = await runSvc(['run', 'list', '--state', 'running', '--limit', '1'], env);
    expect(page.code).toBe(0);
    const hint = /^more: (svc run list .*)$/m.exec(page.stderr)![1]!;
    expect(hint).toMatch(/^svc run list --state running --limit 1 --after \S+$/);
    const next = await runSvc(hint.split(' ').slice(1), env);
    expect(next.stdout).toContain(runs[1]!.run_id);
    // A daemon named by flag is in the hint (pasted, it asks the same svcd); a token is not.
    const flagged = await runSvc(['--kernel-url', env.SVC_KERNEL_URL!, '--token', 's3cr3t-tok', 'run', 'list', '--limit', '1'], { ...env, SVC_KERNEL_URL: '' });
    const flaggedHint = /^more: (svc .*)$/m.exec(flagged.stderr)![1]!;
    expect(flaggedHint).toMatch(new RegExp(`^svc --kernel-url ${env.SVC_KERNEL_URL!.replace(/[./]/g, '\\$&')} --token … run list --limit 1 --after \\S+$`));
    expect(flagged.stderr).not.toContain('s3cr3t-tok');

    // Over its 5-token budget the run fails; --follow prints the end and returns.
    const { lease: spent } = await leaseAndComplete(d, { amount: 1 }, { tokens: 50, usd: 0 });
    expect((await getRun(d, spent.run_id)).state).toBe('failed');
    const followed = await runSvc(['run', 'events', spent.run_id, '--follow', '--interval', '50'], env);
    expect(followed.code).toBe(0);
    expect(followed.stdout).toMatch(/budget\.exceeded[\s\S]*run\.failed/);
  });
});

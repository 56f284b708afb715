/**
 * The inbox for real (issue 5 "Done when": once under tmux against a live svcd): the built
 * svcd and svc binaries, a run parked for a human through the real API (signed bundle, remit,
 * run, action lease, a proposal the default rule sends to the manager role: interface 3,
 * 4.1 rule 4, decisions 5.2, 5.4), `svc approvals` in an 80×24 tmux pane, `a` + Enter, and
 * the run moves on: running again, the approval decided by the actor, the step re-leasable
 * with the action id in `approved_actions`.
 *
 * Needs tmux on the machine (`apt-get install -y tmux`) and a build (`npm run build`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
import { kernelCall, parkRun, testPublisher, type KernelCall } from './parked-run.js';

// A private tmux server on a socket in a temp dir: nothing shared with the user's tmux.
const SOCKET_DIR = tempDir('svc-tmux-sock-');
const SOCKET = join(SOCKET_DIR, 'tmux.sock');
const SESSION = 'inbox';

function tmux(...args: string[]): string {
  return execFileSync('tmux', ['-S', SOCKET, ...args], { encoding: 'utf8' });
}

function pane(): string {
  return tmux('capture-pane', '-p', '-t', SESSION);
}

async function waitForPane(test: (screen: string) => boolean, what: string, ms = 15_000): Promise<string> {
  const end = Date.now() + ms;
  let screen = '';
  for (;;) {
    screen = pane();
    if (test(screen)) return screen;
    if (Date.now() > end) throw new Error(`tmux pane never showed ${what}; it shows:\n${screen}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('svc approvals under tmux against a live svcd (issue 5; I 3, I 4.1 rule 4, D 5.4)', () => {
  const publisher = testPublisher();
  let svcd: SpawnedSvcd | undefined;
  let dataDir = '';
  let kernel = '';
  let api: KernelCall;
  const ok = async (method: string, path: string, body: unknown, status: number) => {
    const res = await api(method, path, body);
    if (res.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };

  beforeAll(async () => {
    if (spawnSync('which', ['tmux']).status !== 0) {
      throw new Error('tmux is required for this test and is not installed: apt-get install -y tmux');
    }
    for (const f of ['dist/cli/index.js', 'dist/daemon/main.js']) {
      if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: build first (npm run build)`);
    }
    dataDir = tempDir('svc-tmux-');
    svcd = await spawnSvcd(['--data-dir', dataDir, '--kernel-listen', '127.0.0.1:0', '--no-gateway', '--publisher', publisher.spec], {
      SVC_LOG_LEVEL: 'warn',
    });
    kernel = svcd.kernelUrl!;
    api = kernelCall(kernel);
  });

  afterAll(async () => {
    // Only the tmux server this file started (its own socket).
    spawnSync('tmux', ['-S', SOCKET, 'kill-server']);
    rmSync(SOCKET_DIR, { recursive: true, force: true });
    await svcd?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows the parked action, approves it with a + Enter, and the run moves on', async () => {
    // 1. A run parked for a human, through the real API (no policy: the default rule sends a
    // system-of-record write to the requester's manager role, D 5.2).
    const parked = await parkRun(api, publisher);
    const run = { run_id: parked.run_id };
    const proposal = { approval_id: parked.approval_id, action_id: parked.action_id };
    const action = parked.action;
    expect((await ok('GET', `/approvals/${parked.approval_id}`, undefined, 200)).rule).toBe('default/sor_write');
    expect((await ok('GET', `/runs/${run.run_id}`, undefined, 200)).state).toBe('parked');

    // 2. The inbox in an 80×24 terminal.
    const cmd = [process.execPath, join(ROOT, 'dist/cli/index.js'), '--kernel-url', kernel, 'approvals', '--actor', 'fin-1:finance'].map((a) => `'${a}'`).join(' ');
    tmux('-f', '/dev/null', 'new-session', '-d', '-s', SESSION, '-x', '80', '-y', '24', `${cmd}; echo "svc exited $?"; sleep 60`);
    let screen = await waitForPane((s) => s.includes('#') && s.includes('Usage'), 'the inbox with its detail pane');
    expect(screen).toContain('svc approvals · role:finance · 1 pending');
    expect(screen).toContain('as fin-1');
    expect(screen).toMatch(/^› \S+\s+billing\.refund\s+alice\s+\{"amount":250,"invoice_id":"INV-7"\}$/m);
    expect(screen).toContain(`${proposal.approval_id} · step refund`);
    expect(screen).toMatch(/Action\s+billing\.refund/);
    expect(screen).toMatch(/Summary\s+Refund 250 USD on INV-7/);
    expect(screen).toContain('"invoice_id": "INV-7"');
    expect(screen).toMatch(/Rule\s+default\/sor_write → role:finance/);
    expect(screen).toContain(`${run.run_id} · parked (human)`);
    expect(screen).toMatch(/Workflow\s+inbox-refunds@1\.0\.0 \/ refund · dept support/);
    expect(screen).toMatch(/Request\s+alice \(role:support, manager role:finance\)/);
    expect(screen).toMatch(/Usage\s+0 \/ 100,000 tokens · \$0\.00 \/ \$10\.00/);
    expect(screen).toMatch(/Events\s+#1 run\.created {2}#2 step\.leased {2}#3 action\.decided/);
    expect(screen).toMatch(/#\d+ approval\.requested/);
    expect(screen).toMatch(/#\d+ run\.parked/);
    for (const line of screen.split('\n')) expect([...line].length).toBeLessThanOrEqual(80);

    // 2b. Narrowed to 50 columns: one screen, redrawn from the top, no stale wrapped copy of
    // the 80-column one above it; then back to 80.
    tmux('resize-window', '-t', SESSION, '-x', '50', '-y', '24');
    screen = await waitForPane((s) => s.split('\n')[1]?.startsWith('› ') === true && s.includes('q quit'), 'the inbox redrawn at 50 columns');
    expect(screen.split('\n')[0]).toMatch(/^svc approvals · role:finance · 1 pending/);
    expect(screen.match(/svc approvals ·/g)).toHaveLength(1);
    for (const line of screen.split('\n')) expect([...line].length).toBeLessThanOrEqual(50);
    // 2c. Under 40×12 (svc-approvals(1)): a line that says so, not a screen the terminal wraps.
    tmux('resize-window', '-t', SESSION, '-x', '20', '-y', '6');
    screen = await waitForPane((s) => s.startsWith('Too small: 20×6\nneeds 40×12\nq quit'), 'the too-small lines at 20×6');
    expect(screen).not.toContain('svc approvals');
    tmux('resize-window', '-t', SESSION, '-x', '80', '-y', '24');
    await waitForPane((s) => /as fin-1/.test(s.split('\n')[0] ?? ''), 'the inbox back at 80 columns');

    // 3. Approve: a opens the prompt, Enter confirms.
    tmux('send-keys', '-t', SESSION, 'a');
    await waitForPane((s) => s.includes('Reason (optional):'), 'the approve prompt');
    tmux('send-keys', '-t', SESSION, 'Enter');
    const notice = `Approved billing.refund; run ${run.run_id} is running`;
    screen = await waitForPane((s) => s.includes('No pending approvals for role:finance') && s.includes(notice), 'the empty inbox and the notice after approving');

    // 4. The run moved on.
    const after = await ok('GET', `/runs/${run.run_id}`, undefined, 200);
    expect(after.state).toBe('running');
    const decided = await ok('GET', `/approvals/${proposal.approval_id}`, undefined, 200);
    expect(decided).toMatchObject({ state: 'approved', decision: 'approved', actor: { id: 'fin-1', role: 'finance' } });
    const relet = await ok('POST', '/leases', { worker_id: 'tmux-worker', kinds: ['action'], ttl_seconds: 60 }, 200);
    expect(relet.run_id).toBe(run.run_id);
    expect(relet.context.approved_actions).toContain(proposal.action_id);
    const again = await ok('POST', `/leases/${relet.lease_id}/actions`, { action }, 200);
    expect(again).toMatchObject({ decision: 'allow', rule: `approved:${proposal.approval_id}` });

    // 5. q quits with exit 0 and leaves the alternate screen (the shell's line is visible again).
    tmux('send-keys', '-t', SESSION, 'q');
    screen = await waitForPane((s) => /svc exited \d+/.test(s), 'the exit status after q');
    expect(screen).toContain('svc exited 0');
    expect(screen).not.toContain('svc approvals ·');
  });
});

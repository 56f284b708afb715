/**
 * The built `svc approvals list|approve|reject` binary (issue 5; interface 4.1 GET/POST
 * /approvals, 7.1 not_the_approver/already_decided; decisions 5.4, §11) against a local HTTP
 * server that speaks the documented approvals API. Exit codes: 0 ok, 1 refused, 2 usage,
 * 3 unreachable (cli/exit.ts).
 */
import stringWidth from 'string-width';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NO_DAEMON, runSvc } from '../helpers/cli.js';
import { FakeKernel, approval } from '../tui/fake-kernel.js';

let k: FakeKernel;
let server: Awaited<ReturnType<FakeKernel['listen']>>;
const svc = (args: string[], env: Record<string, string> = {}) => runSvc(['--kernel-url', server.url, ...args], env);

beforeAll(async () => {
  k = new FakeKernel();
  server = await k.listen();
});
afterAll(async () => {
  await server[Symbol.asyncDispose]();
});
beforeEach(() => {
  k.approvals.clear();
  k.runs.clear();
  k.events.clear();
  k.calls = [];
  k.onDecide = null;
});

describe('svc approvals list (I 4.1 GET /approvals)', () => {
  it('prints pending approvals of the actor role as a table, newest first', async () => {
    k.add(approval(1));
    k.add(approval(2, { action: { tool: 'crm.export', args: {} } }));
    k.add(approval(3, { approver: 'role:legal' }));
    const r = await svc(['--actor', 'fin-1:finance', 'approvals', 'list']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^APPROVAL\s+CREATED\s+STATE\s+APPROVER\s+TOOL\s+RUN\s+RULE$/);
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(/^apr_01JTEST000000000000000002\s+2026-01-01T10:02:00.000Z\s+pending\s+role:finance\s+crm\.export\s+run_01JTEST000000000000000002\s+refunds\/large_refund$/);
    expect(lines[2]).toContain('apr_01JTEST000000000000000001');
    expect(k.calls[0]!.query).toMatchObject({ state: 'pending', approver: 'role:finance' });
  });

  it('marks the rule of an approval a failed condition asked for (D 5.1)', async () => {
    k.add(approval(1, { errors: [{ rule: 'refunds/large_refund', message: 'no such key: amout' }] }));
    k.add(approval(2));
    const r = await svc(['--actor', 'fin-1:finance', 'approvals', 'list']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[1]).toMatch(/refunds\/large_refund$/);
    expect(lines[2]).toMatch(/apr_01JTEST000000000000000001\s.*refunds\/large_refund \(failed closed\)$/);
  });

  it('--json prints the approvals as a JSON array; --state all and --approver override the filters', async () => {
    k.add(approval(1, { state: 'approved', decision: 'approved', actor: { id: 'fin-2', role: 'finance' } }));
    k.add(approval(2, { approver: 'role:legal' }));
    const r = await svc(['--json', 'approvals', 'list', '--state', 'all', '--approver', 'role:legal'], { SVC_ACTOR: 'fin-1:finance' });
    expect(r.code).toBe(0);
    const list = JSON.parse(r.stdout) as Array<{ approval_id: string }>;
    expect(list.map((a) => a.approval_id)).toEqual(['apr_01JTEST000000000000000002']);
    expect(k.calls[0]!.query).toEqual({ approver: 'role:legal', limit: '100' });
  });

  it('without an actor lists every approver; says so when there are none', async () => {
    const r = await svc(['approvals', 'list']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('no approvals\n');
    expect(k.calls[0]!.query).toEqual({ state: 'pending', limit: '100' });
  });

  it('CJK and emoji in the table keep its columns in line (svc-approvals(1) COMMANDS list, svc(1) DESCRIPTION)', async () => {
    k.add(approval(1, { action: { tool: '退款.审批', args: {} }, rule: '规则/退款🎉' }));
    k.add(approval(2));
    const r = await svc(['--actor', 'fin-1:finance', 'approvals', 'list']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    // RUN starts at the same terminal column in every line, whatever the TOOL before it holds.
    const runAt = lines.map((l) => stringWidth(l.slice(0, l.search(/RUN|run_01/))));
    expect(new Set(runAt).size, r.stdout).toBe(1);
    expect(lines[2]).toContain('退款.审批  ');
  });

  it('a list of megabytes of JSON arrives whole, multi-byte characters intact (svc-approvals(1) OUTPUT)', async () => {
    k.pageSize = 1000;
    try {
      const note = '重复退款：该发票已支付🎉'.repeat(300);
      for (let n = 1; n <= 300; n++) k.add(approval(n, { action: { tool: 'billing.refund', args: { invoice_id: `INV-${n}`, note }, summary: note } }));
      const r = await svc(['--json', 'approvals', 'list', '--limit', '300']);
      expect(r.code).toBe(0);
      expect(r.stdout.length).toBeGreaterThan(2_000_000);
      const list = JSON.parse(r.stdout) as Array<{ action: { args: { note: string } } }>;
      expect(list).toHaveLength(300);
      expect(list.every((a) => a.action.args.note === note)).toBe(true);
    } finally {
      k.pageSize = 100;
    }
  });

  it('a list cut by --limit says so on standard error; a whole one says nothing', async () => {
    for (let n = 1; n <= 3; n++) k.add(approval(n));
    const cut = await svc(['--json', 'approvals', 'list', '--limit', '2']);
    expect(cut.code).toBe(0);
    expect(JSON.parse(cut.stdout)).toHaveLength(2);
    expect(cut.stderr).toBe('svc: showing the newest 2; there are more (raise --limit, up to 10000)\n');
    const whole = await svc(['--json', 'approvals', 'list', '--limit', '3']);
    expect(JSON.parse(whole.stdout)).toHaveLength(3);
    expect(whole.stderr).toBe('');
  });

  it('refuses bad --state, --approver and --limit values with exit 2', async () => {
    expect((await svc(['approvals', 'list', '--state', 'open'])).code).toBe(2);
    const r = await svc(['approvals', 'list', '--approver', 'finance']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--approver must be role:ROLE');
    expect((await svc(['approvals', 'list', '--limit', '0'])).code).toBe(2);
    // A reason svcd would refuse is a usage error before any request (4096 characters, an emoji one).
    for (const decide of ['approve', 'reject']) {
      const long = await svc(['--actor', 'fin-1:finance', 'approvals', decide, 'apr_x', '--reason', '🎉'.repeat(4097)]);
      expect(long.code, decide).toBe(2);
      expect(long.stderr).toContain('--reason is 4097 characters; svcd takes at most 4096');
    }
    expect(k.calls).toHaveLength(0);
  });
});

describe('svc approvals with a mistyped subcommand (svc(1) exit 2)', () => {
  it('names the word and the likely command, instead of "too many arguments"', async () => {
    const typo = await runSvc(['--kernel-url', NO_DAEMON, 'approvals', 'aprove', 'apr_x', '--actor', 'fin-1:finance']);
    expect([typo.code, typo.stderr]).toEqual([2, 'svc: unknown approvals command "aprove" (did you mean approve?); the commands are list, approve, reject\n']);
    const other = await runSvc(['--kernel-url', NO_DAEMON, 'approvals', 'frobnicate']);
    expect([other.code, other.stderr]).toEqual([2, 'svc: unknown approvals command "frobnicate"; the commands are list, approve, reject\n']);
    expect((await runSvc(['approvals', '--help'])).stdout).toContain('Usage: svc approvals [options] [command]');
  });
});

describe('svc approvals approve|reject (I 4.1 POST /approvals/{id}, D 5.4)', () => {
  it('approves as the actor', async () => {
    const a = k.add(approval(1));
    const r = await svc(['--actor', 'fin-1:finance', 'approvals', 'approve', a.approval_id, '--reason', 'looks right']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`approved ${a.approval_id}; run ${a.run_id} is running\n`);
    expect(k.calls[0]).toMatchObject({ method: 'POST', path: `/approvals/${a.approval_id}`, body: { decision: 'approved', actor: { id: 'fin-1', role: 'finance' }, reason: 'looks right' } });
  });

  it('rejects with a reason, printing JSON with --json', async () => {
    const a = k.add(approval(1));
    const r = await svc(['--json', 'approvals', 'reject', a.approval_id, '--reason', 'duplicate'], { SVC_ACTOR: 'fin-1:finance' });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ approval_id: a.approval_id, decision: 'rejected', run_id: a.run_id, run_state: 'running' });
    expect(k.approvals.get(a.approval_id)).toMatchObject({ state: 'rejected', reason: 'duplicate' });
  });

  it('reject needs a non-empty --reason, and both need an actor (exit 2, nothing sent)', async () => {
    const a = k.add(approval(1));
    const noReason = await svc(['--actor', 'fin-1:finance', 'approvals', 'reject', a.approval_id]);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain("required option '--reason <text>' not specified");
    const blank = await svc(['--actor', 'fin-1:finance', 'approvals', 'reject', a.approval_id, '--reason', '  ']);
    expect(blank.code).toBe(2);
    const noActor = await svc(['approvals', 'approve', a.approval_id]);
    expect(noActor.code).toBe(2);
    expect(noActor.stderr).toContain('an actor is required');
    expect(k.calls).toHaveLength(0);
  });

  it('a decision that lost the race exits 1 and says who decided what (409 already_decided)', async () => {
    const a = k.add(approval(1));
    k.decideAs(a.approval_id, 'rejected', { id: 'fin-2', role: 'finance' }, 'duplicate');
    const r = await svc(['--actor', 'fin-1:finance', 'approvals', 'approve', a.approval_id]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`svc: already_decided: ${a.approval_id} was already rejected by fin-2 (role:finance) at 2026-01-01T11:00:00.000Z: duplicate\n`);
    const j = await svc(['--json', '--actor', 'fin-1:finance', 'approvals', 'approve', a.approval_id]);
    expect(JSON.parse(j.stdout)).toMatchObject({ error: { code: 'already_decided' } });
  });

  it('an approval cancelled by an abandon exits 1 and says so', async () => {
    const a = k.add(approval(1));
    k.approvals.set(a.approval_id, { ...a, state: 'cancelled' });
    const r = await svc(['--actor', 'fin-1:finance', 'approvals', 'reject', a.approval_id, '--reason', 'no']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`svc: invalid_state: ${a.approval_id} was cancelled when its run ${a.run_id} ended (abandoned) before anyone decided\n`);
  });

  it('a refusal exits 1 with not_the_approver; an unknown id exits 1 with not_found', async () => {
    const a = k.add(approval(1));
    const r = await svc(['--actor', 'leg-1:legal', 'approvals', 'approve', a.approval_id]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`not_the_approver: leg-1 (role:legal) may not decide ${a.approval_id}`);
    const nf = await svc(['--actor', 'fin-1:finance', 'approvals', 'approve', 'apr_nope']);
    expect(nf.code).toBe(1);
    expect(nf.stderr).toContain('not_found: approval apr_nope not found');
  });
});

describe('svc approvals: daemon and terminal', () => {
  it('exits 3 naming the address when svcd is unreachable', async () => {
    const r = await runSvc(['--kernel-url', NO_DAEMON, '--actor', 'fin-1:finance', 'approvals', 'list']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`cannot reach svcd at ${NO_DAEMON}`);
  });

  it('the inbox needs an actor and a terminal (exit 2 otherwise)', async () => {
    const noActor = await svc(['approvals']);
    expect(noActor.code).toBe(2);
    expect(noActor.stderr).toContain('an actor is required');
    const noTty = await svc(['--actor', 'fin-1:finance', 'approvals']);
    expect(noTty.code).toBe(2);
    expect(noTty.stderr).toContain('the inbox needs a terminal; use "svc approvals list"');
    // --json is for programs: it points at the list, on a terminal too (checked before the terminal).
    const json = await svc(['--json', '--actor', 'fin-1:finance', 'approvals']);
    expect(json.code).toBe(2);
    expect(json.stderr).toContain('the inbox has no --json form; use "svc --json approvals list"');
  });
});

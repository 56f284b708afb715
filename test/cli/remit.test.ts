/**
 * `svc remit` against a live svcd (issue 2; interface 4.1, 5.3; decisions §3, §11): mint prints a
 * token that decode accepts; decode reports valid / expired / not yet valid / signature
 * invalid / malformed in one line and exits 1 unless valid; exit 2 on usage errors, 3 when the
 * daemon is unreachable. Runs the built dist/cli/index.js (`npx tsc -p tsconfig.json` first).
 */
import { describe, expect, it } from 'vitest';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair } from '../../src/keys/ed25519.js';
import { KeyRing } from '../../src/keys/keyring.js';
import { encodeToken } from '../../src/remit/token.js';
import type { RemitPayload } from '../../src/types.js';
import { NO_DAEMON, runSvc } from '../helpers/cli.js';
import { startTestDaemon } from '../helpers/daemon.js';

const MINT = ['remit', 'mint', '--tools', 'billing.*,crm.lookup', '--scopes', 'sql:table:*', '--autonomy', 'supervised', '--requested-by', 'ana:agent:support-lead', '--spend-usd', '5', '--spend-tokens', '100000'];

describe('svc remit (issue 2, I 4.1)', () => {
  it('mint prints a token that decode accepts; show and derive work; --json on each', async () => {
    await using d = await startTestDaemon();
    const k = ['--kernel-url', d.kernelUrl!];
    const mint = await runSvc([...k, ...MINT, '--grants', 'pii', '--policy-set', 'refunds,baseline@1.0.0', '--ttl', '600']);
    expect(mint.code, mint.stderr).toBe(0);
    const token = mint.stdout.trim();
    expect(token).toMatch(/^krt1\.[^.]+\.[^.]+\.[^.]+$/);
    expect(mint.stderr).toMatch(/remit rmt_\w+ expires/);
    // Neither policy is pushed: the remit is minted (a policy may come later), with a warning
    // for each, since a run started with it would fail with policy_not_found.
    expect(mint.stderr).toContain('svc: warning: policy refunds is not pushed yet: a run started with this remit fails with policy_not_found until it is (svc policy push FILE --name refunds --version VERSION)');
    expect(mint.stderr).toContain('svc: warning: policy baseline@1.0.0 is not pushed yet');
    expect((await d.kernel_('/policies', { body: { name: 'refunds', version: '1.0.0', source: 'allow all when true' } })).status).toBe(201);
    const pushed = await runSvc([...k, ...MINT, '--policy-set', 'refunds,refunds@1.0.0']);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stderr).not.toContain('warning');

    const dec = await runSvc([...k, 'remit', 'decode', token]);
    expect(dec.code, dec.stderr).toBe(0);
    const [line, ...rest] = dec.stdout.split('\n');
    expect(line).toMatch(/^valid: remit rmt_\w+ signed by cp-/);
    const payload = JSON.parse(rest.join('\n')) as RemitPayload;
    expect(payload).toMatchObject({ tools: ['billing.*', 'crm.lookup'], scopes: ['sql:table:*'], grants: ['pii'], spend: { tokens: 100000, usd: 5 }, autonomy: 'supervised', policy_set: ['refunds', 'baseline@1.0.0'], requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' } });
    expect(payload.exp - payload.iat).toBe(600);

    // Nothing on stdin, or an empty argument, is a usage error (2) that says so, before svcd is asked.
    for (const [args, stdin, text] of [[['remit', 'decode', '-'], '\n', 'no token on standard input'], [['remit', 'decode', ''], '', 'remit decode: <token> must not be empty']] as const) {
      const none = await runSvc([...k, ...args], {}, stdin);
      expect(none.code).toBe(2);
      expect(none.stderr).toBe(`svc: ${text}\n`);
    }
    const fromStdin = await runSvc([...k, 'remit', 'decode', '-'], {}, token + '\n');
    expect(fromStdin.code).toBe(0);

    const decJson = await runSvc([...k, '--json', 'remit', 'decode', token]);
    expect(JSON.parse(decJson.stdout)).toMatchObject({ status: 'valid', valid: true, payload: { rid: payload.rid } });

    const show = await runSvc([...k, 'remit', 'show', payload.rid]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(payload.rid);
    expect(show.stdout).toMatch(/autonomy\s+supervised/);
    const showJson = await runSvc([...k, '--json', 'remit', 'show', payload.rid]);
    expect(JSON.parse(showJson.stdout)).toMatchObject({ rid: payload.rid, parent_id: null, run_id: null });

    const derive = await runSvc([...k, '--json', 'remit', 'derive', payload.rid, '--tools', 'billing.refund', '--spend-tokens', '10', '--spend-usd', '0.5', '--autonomy', 'propose']);
    expect(derive.code, derive.stderr).toBe(0);
    const child = JSON.parse(derive.stdout);
    expect(child).toMatchObject({ parent_id: payload.rid, remit_id: expect.stringMatching(/^rmt_/), token: expect.stringMatching(/^krt1\./) });
    expect((await runSvc([...k, 'remit', 'decode', child.token])).code).toBe(0);

    const mintJson = await runSvc([...k, '--json', ...MINT]);
    expect(Object.keys(JSON.parse(mintJson.stdout)).sort()).toEqual(['expires_at', 'remit_id', 'token']);
  });

  it('derive that widens exits 1 with the service error (remit_widens, field)', async () => {
    await using d = await startTestDaemon();
    const k = ['--kernel-url', d.kernelUrl!];
    const m = JSON.parse((await runSvc([...k, '--json', ...MINT])).stdout);
    const r = await runSvc([...k, 'remit', 'derive', m.remit_id, '--autonomy', 'autonomous']);
    expect(r.code).toBe(1);
    // One line; details.field and value are in the message, so no JSON repeats them (I 5.4, svc(1)).
    expect(r.stderr).toMatch(/^svc: remit_widens: autonomy autonomous is above the parent's \w+\n$/);
    const j = await runSvc([...k, '--json', 'remit', 'derive', m.remit_id, '--tools', 'crm.*']);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.stdout).error).toMatchObject({ code: 'remit_widens', details: { field: 'tools' } });
    const nf = await runSvc([...k, 'remit', 'show', 'rmt_01JAAAAAAAAAAAAAAAAAAAAAAA']);
    expect(nf.code).toBe(1);
    expect(nf.stderr).toMatch(/not_found/);
  });

  it('decode says expired, not yet valid, signature invalid or malformed in one line and exits 1', async () => {
    await using d = await startTestDaemon();
    const k = ['--kernel-url', d.kernelUrl!];
    const ring = d.kernel!.keys;
    const now = Math.floor(Date.now() / 1000);
    const base: RemitPayload = {
      rid: 'rmt_01JAAAAAAAAAAAAAAAAAAAAAAA', iss: ring.keyId, iat: now - 100, nbf: now - 100, exp: now - 10,
      tools: [], scopes: [], grants: [], spend: { tokens: 0, usd: 0 }, autonomy: 'observe', policy_set: [], requested_by: { id: 'a', role: 'b', manager: 'c' },
    };
    const expired = await runSvc([...k, 'remit', 'decode', encodeToken(base, ring)]);
    expect(expired.code).toBe(1);
    expect(expired.stdout.split('\n')[0]).toMatch(/^expired: remit rmt_/);
    expect(JSON.parse(expired.stdout.split('\n').slice(1).join('\n')).rid).toBe(base.rid);

    const future = await runSvc([...k, 'remit', 'decode', encodeToken({ ...base, nbf: now + 1000, exp: now + 2000 }, ring)]);
    expect(future.code).toBe(1);
    expect(future.stdout.split('\n')[0]).toMatch(/^not yet valid: /);
    // A time verdict is this machine's: the line says which clock, since the gateway uses its own.
    expect(future.stdout.split('\n')[0]).toMatch(/\(this machine's clock reads \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z\)$/);
    expect(expired.stdout.split('\n')[0]).toMatch(/\(this machine's clock reads /);

    const stranger = new KeyRing(generateKeyPair().seed);
    const sig = await runSvc([...k, 'remit', 'decode', encodeToken({ ...base, iss: stranger.keyId, exp: now + 1000 }, stranger)]);
    expect(sig.code).toBe(1);
    expect(sig.stdout.split('\n')[0]).toMatch(/^signature invalid: /);

    const bad = await runSvc([...k, 'remit', 'decode', 'krt1.x.' + encodeBase64url('{}') + '.AA']);
    expect(bad.code).toBe(1);
    expect(bad.stdout.trim().split('\n')).toHaveLength(1);
    expect(bad.stdout).toMatch(/^malformed: /);
    const badJson = await runSvc([...k, '--json', 'remit', 'decode', 'nonsense']);
    expect(JSON.parse(badJson.stdout)).toMatchObject({ status: 'malformed', valid: false, payload: null });
  });

  it('derive takes one spend flag alone, --expires-at and --not-before (I 5.4, D §3)', async () => {
    await using d = await startTestDaemon();
    const k = ['--kernel-url', d.kernelUrl!];
    const m = JSON.parse((await runSvc([...k, '--json', ...MINT, '--ttl', '3600'])).stdout);
    const parent = JSON.parse((await runSvc([...k, '--json', 'remit', 'show', m.remit_id])).stdout);
    const exp = new Date((parent.exp - 600) * 1000).toISOString();
    const r = await runSvc([...k, '--json', 'remit', 'derive', m.remit_id, '--spend-usd', '1', '--expires-at', exp, '--not-before', String(parent.nbf + 30)]);
    expect(r.code, r.stderr).toBe(0);
    const child = JSON.parse((await runSvc([...k, '--json', 'remit', 'show', JSON.parse(r.stdout).remit_id])).stdout);
    expect(child).toMatchObject({ spend: { tokens: 100000, usd: 1 }, exp: parent.exp - 600, nbf: parent.nbf + 30 });
    for (const when of ['tomorrow', '2026-11-22T10:00:00']) {
      const bad = await runSvc([...k, 'remit', 'derive', m.remit_id, '--expires-at', when]);
      expect(bad.code, when).toBe(2);
      expect(bad.stderr).toMatch(/--expires-at must be an ISO 8601 time with a zone/);
    }
    // A day that does not exist is not rolled on to one that does (02-30 to 03-02), nor sent.
    for (const when of ['2026-02-30T10:00:00Z', '2026-11-31T10:00:00+01:00', '2027-02-29T00:00:00Z']) {
      const bad = await runSvc([...k, 'remit', 'derive', m.remit_id, '--expires-at', when]);
      expect(bad.code, when).toBe(2);
      expect(bad.stderr).toContain(`--expires-at: ${when.slice(0, 10)} is not a date in the calendar`);
    }
    const leap = await runSvc([...k, 'remit', 'derive', m.remit_id, '--not-before', '2028-02-29T00:00:00Z']);
    expect(leap.stderr).not.toContain('not a date in the calendar'); // a leap day is one
  });

  it('list prints the remits not expired as a table, newest first; --state, --parent, --limit, --json (GET /v1/remits)', async () => {
    await using d = await startTestDaemon();
    const k = ['--kernel-url', d.kernelUrl!];
    const mint = async (extra: string[]) => {
      const r = await runSvc([...k, '--json', ...MINT, ...extra]);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { remit_id: string; expires_at: string };
    };
    const a = await mint([]);
    const b = await mint(['--ttl', '1']);
    const c = await mint(['--requested-by', 'bo:agent:ops-lead', '--autonomy', 'autonomous']);
    const exp = Date.parse(b.expires_at);
    while (Date.now() < exp) await new Promise((r) => setTimeout(r, 50));

    const list = await runSvc([...k, 'remit', 'list']);
    expect(list.code, list.stderr).toBe(0);
    const lines = list.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^REMIT\s+EXPIRES\s+REQUESTER\s+RUN\s+AUTONOMY\s+TOOLS$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual([c.remit_id, a.remit_id]);
    expect(lines[1]).toMatch(new RegExp(`^${c.remit_id}\\s+${c.expires_at.replace(/\./g, '\\.')}\\s+bo\\s+-\\s+autonomous\\s+billing\\.\\*,crm\\.lookup$`));
    expect(lines[2]).toMatch(/\sana\s+-\s+supervised\s+billing\.\*,crm\.lookup$/);

    const expired = await runSvc([...k, '--json', 'remit', 'list', '--state', 'expired']);
    expect((JSON.parse(expired.stdout) as Array<{ rid: string }>).map((r) => r.rid)).toEqual([b.remit_id]);
    const cut = await runSvc([...k, 'remit', 'list', '--state', 'all', '--limit', '2']);
    expect(cut.stdout.trim().split('\n')).toHaveLength(3);
    expect(cut.stderr).toBe('svc: showing the newest 2; there are more (raise --limit, up to 10000)\n');
    const none = await runSvc([...k, 'remit', 'list', '--parent', a.remit_id]);
    expect(none.stdout).toBe('no remits\n');
    const bad = await runSvc([...k, 'remit', 'list', '--limit', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--limit must be an integer from 1 to 10000, got "0"');
  });

  it('exits 2 on usage errors', async () => {
    for (const args of [
      ['remit', 'mint', '--tools', 'a.b'],
      [...MINT.filter((a) => a !== '--spend-usd' && a !== '5')],
      [...MINT, '--autonomy', 'godmode'],
      [...MINT, '--requested-by', 'ana:agent'],
      [...MINT, '--ttl', 'soon'],
      [...MINT.slice(0, -1), 'lots'],
      ['remit', 'derive'],
      ['remit', 'decode'],
      ['remit', 'frobnicate'],
      [...MINT, '--tools', 'billing.*,,crm.lookup'],
      [...MINT, '--scopes', 'sql:table:*,'],
      ['remit', 'derive', 'rmt_x', '--grants', ',pii'],
      [...MINT, '--spend-usd', '1e10'], // over the kernel's billion: said before any request
      [...MINT, '--spend-usd', '0.0000001'], // under a micro-dollar: not rounded to 0 quietly
      ['remit', 'derive', 'rmt_x', '--spend-usd', '-1'],
      [...MINT, '--spend-usd', '0x10'], // Number() would read 16 dollars
      [...MINT, '--spend-usd', 'Infinity'],
      [...MINT, '--spend-tokens', '0x10'],
      [...MINT, '--ttl', '1e3'],
    ]) {
      const r = await runSvc(['--kernel-url', NO_DAEMON, ...args]);
      expect(r.code, args.join(' ') + r.stderr).toBe(2);
    }
    const typo = await runSvc(['--kernel-url', NO_DAEMON, ...MINT, '--tools', 'a.b,,c.d']);
    expect(typo.stderr.trim()).toBe('svc: --tools has an empty entry in "a.b,,c.d"; separate patterns with single commas');
  });

  it("an empty list flag is an explicit empty list: --tools '' mints a remit for model steps alone", async () => {
    await using d = await startTestDaemon();
    const k = ['--kernel-url', d.kernelUrl!];
    const args = MINT.map((a, i) => (MINT[i - 1] === '--tools' ? '' : a));
    const r = await runSvc([...k, '--json', ...args]);
    expect(r.code, r.stderr).toBe(0);
    const shown = JSON.parse((await runSvc([...k, '--json', 'remit', 'show', JSON.parse(r.stdout).remit_id])).stdout);
    expect(shown).toMatchObject({ tools: [], scopes: ['sql:table:*'] });
  });

  it('exits 3 when the daemon is unreachable', async () => {
    for (const args of [MINT, ['remit', 'show', 'rmt_x'], ['remit', 'decode', 'krt1.a.b.c'], ['remit', 'derive', 'rmt_x']]) {
      const r = await runSvc(['--kernel-url', NO_DAEMON, ...args]);
      expect(r.code, args.join(' ')).toBe(3);
      expect(r.stderr).toMatch(/cannot reach svcd/);
    }
  });
});

/**
 * D §11 and D §2 for the `svc` CLI, black-box: the built CLI against the built svcd (kernel,
 * gateway with test tools, a token). `--json` on every command that prints data gives JSON
 * (NDJSON for event streams), also after the subcommand; `--kernel-url`/`SVC_KERNEL_URL`,
 * `--token`/`SVC_TOKEN`, `--actor`/`SVC_ACTOR` are honoured, flags over variables; `svc keys gen`
 * writes `{key_id, public_key, private_key}` with mode 0600. One daemon for the file.
 */
import { statSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { runSvc, NO_DAEMON } from '../helpers/cli.js';
import { spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
import { REFUNDS_POLICY, REQUESTER, refundsBundle } from '../integration/run-fixtures.js';

const TOKEN = 'cli-spec-token-77';
const publisher = generatePublisherKey();
let svcd: SpawnedSvcd;
let dir: string;
let env: Record<string, string>;
let runId: string;
let approvalId: string;
let bundleId: string;

async function post(path: string, body: unknown): Promise<any> {
  const res = await fetch(`${svcd.kernelUrl}/v1${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body: JSON.stringify(body) });
  return { status: res.status, body: res.status === 204 ? null : await res.json() };
}

beforeAll(async () => {
  dir = tempDir('svc-spec-cli-');
  const cfg = join(dir, 'gateway.yaml');
  writeFileSync(cfg, 'connectors: []\n');
  svcd = await spawnSvcd(
    ['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', cfg, '--publisher', `${publisher.key_id}:${publisher.public_key}`],
    { SVC_TOKEN: TOKEN, SVC_GATEWAY_TEST_TOOLS: '1', SVC_GATEWAY_DATA: join(dir, 'gw'), SVC_CANARY_INTERVAL: '3600' },
  );
  env = { SVC_KERNEL_URL: svcd.kernelUrl!, SVC_GATEWAY_URL: svcd.gatewayUrl!, SVC_TOKEN: TOKEN };
  // A run parked for approval, through the API.
  const bundle = refundsBundle();
  bundleId = (await post('/bundles', { bundle, signature: signBundle(bundle, publisher) })).body.bundle_id;
  await post('/policies', { name: 'refunds', version: '1', source: REFUNDS_POLICY });
  const remit = (await post('/remits', { tools: ['billing.*'], scopes: ['sql:table:*'], grants: [], spend: { tokens: 1000, usd: 5 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: ['refunds'], requested_by: REQUESTER })).body;
  runId = (await post('/runs', { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'i' }, remit_id: remit.remit_id, requested_by: REQUESTER })).body.run_id;
  for (const [kind, output] of [['model', { amount: 500 }], ['tool', { rows: [] }]] as const) {
    const l = await post('/leases', { worker_id: 'w', kinds: [kind] });
    await post(`/leases/${l.body.lease_id}/complete`, { output, usage: { tokens: 1, usd: 0 } });
  }
  const l = await post('/leases', { worker_id: 'w', kinds: ['action'] });
  approvalId = (await post(`/leases/${l.body.lease_id}/actions`, { action: { tool: 'billing.refund', args: { amount: 500 } } })).body.approval_id;
}, 30_000);

afterAll(async () => {
  await svcd?.stop();
});

/** Runs `svc` and parses its stdout as JSON, or as NDJSON when `lines`. */
async function json(args: string[], extraEnv: Record<string, string> = {}, lines = false): Promise<any> {
  const r = await runSvc(args, { ...env, ...extraEnv });
  expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
  if (lines) return r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  return JSON.parse(r.stdout);
}

describe('D §11: --json on every command that prints data', () => {
  const reading: Array<[string, () => string[], boolean?]> = [
    ['keys show', () => ['keys', 'show']],
    ['bundle list', () => ['bundle', 'list']],
    ['bundle show', () => ['bundle', 'show', bundleId]],
    ['policy list', () => ['policy', 'list']],
    ['policy show', () => ['policy', 'show', 'refunds']],
    ['run list', () => ['run', 'list']],
    ['run show', () => ['run', 'show', runId]],
    ['run events', () => ['run', 'events', runId], true],
    ['run replay', () => ['run', 'replay', runId]],
    ['approvals list', () => ['approvals', 'list']],
    ['gateway tools', () => ['gateway', 'tools']],
    ['gateway canaries', () => ['gateway', 'canaries']],
    ['gateway probe', () => ['gateway', 'probe', 'test']],
  ];

  // After the subcommand, the position a newcomer types (before it is what the other CLI tests use).
  it.each(reading)('%s --json prints JSON', async (_name, args, lines) => {
    expect(typeof (await json([...args(), '--json'], {}, lines))).toBe('object');
  });

  it('run list --json holds the API members; approvals list --json holds the pending approval', async () => {
    const runs = await json(['run', 'list', '--json']);
    expect(JSON.stringify(runs)).toContain(runId);
    const approvals = await json(['approvals', 'list', '--json']);
    expect(JSON.stringify(approvals)).toContain(approvalId);
  });

  it('approvals approve --json with SVC_ACTOR, and --actor over SVC_ACTOR', async () => {
    // SVC_ACTOR names the requester's manager role but --actor (a finance approver) is used.
    const out = await json(['--json', '--actor', 'fin-7:finance', 'approvals', 'approve', approvalId, '--reason', 'ok'], { SVC_ACTOR: 'nobody:legal' });
    expect(JSON.stringify(out)).toContain(runId);
    const again = await runSvc(['--json', 'approvals', 'approve', approvalId, '--reason', 'ok'], { ...env, SVC_ACTOR: 'fin-7:finance' });
    expect(again.code).toBe(1);
    expect(again.stdout + again.stderr).toContain('already_decided');
  });

  it('run resume --json on a running run reports invalid_state with exit 1', async () => {
    const r = await runSvc(['--json', '--actor', 'ops-1:ops', 'run', 'resume', runId], env);
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).toContain('invalid_state');
  });
});

describe('D §11: --json on the commands that change state and print the result', () => {
  /** A lease of `run`'s next `kind` step; steps of older runs (handed out first) are failed out of the way. */
  async function leaseOf(run: string, kind: string): Promise<any> {
    for (;;) {
      const l = await post('/leases', { worker_id: 'w', kinds: [kind] });
      if (l.status !== 200 || l.body.run_id === run) return l;
      await post(`/leases/${l.body.lease_id}/fail`, { error: { code: 'x', message: 'x' }, deterministic: true });
    }
  }

  it('run resume --json prints {run_id, state} of a parked run; approvals reject --json prints {run_id, run_state}', async () => {
    const remit = (await post('/remits', { tools: ['billing.*'], scopes: ['sql:table:*'], grants: [], spend: { tokens: 1000, usd: 5 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: ['refunds'], requested_by: REQUESTER })).body;
    const run = (await post('/runs', { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'i' }, remit_id: remit.remit_id, requested_by: REQUESTER })).body.run_id;
    let l = await leaseOf(run, 'model');
    await post(`/leases/${l.body.lease_id}/fail`, { error: { code: 'bad', message: 'x' }, deterministic: true });
    const resumed = await json(['--actor', 'ops-1:ops', 'run', 'resume', run, '--json']);
    expect(resumed).toMatchObject({ run_id: run, state: 'running' });
    for (const [kind, output] of [['model', { amount: 500 }], ['tool', { rows: [] }]] as const) {
      l = await leaseOf(run, kind);
      await post(`/leases/${l.body.lease_id}/complete`, { output, usage: { tokens: 1, usd: 0 } });
    }
    l = await leaseOf(run, 'action');
    const approval = (await post(`/leases/${l.body.lease_id}/actions`, { action: { tool: 'billing.refund', args: { amount: 500 } } })).body.approval_id;
    const rejected = await json(['--actor', 'fin-7:finance', 'approvals', 'reject', approval, '--reason', 'no', '--json']);
    expect(rejected).toMatchObject({ run_id: run, run_state: 'running' });
  });
});

describe('D §11 connection flags over variables; D §10 token', () => {
  it('--kernel-url overrides SVC_KERNEL_URL; --token overrides SVC_TOKEN', async () => {
    expect((await runSvc(['--json', '--kernel-url', svcd.kernelUrl!, 'run', 'list'], { ...env, SVC_KERNEL_URL: NO_DAEMON })).code).toBe(0);
    const wrong = await runSvc(['--json', '--token', 'wrong', 'run', 'list'], env);
    expect(wrong.code).toBe(1);
    expect(wrong.stdout + wrong.stderr).toContain('unauthorized');
    expect(wrong.stdout + wrong.stderr).not.toContain(TOKEN);
    expect((await runSvc(['--json', '--token', TOKEN, 'run', 'list'], { ...env, SVC_TOKEN: 'wrong' })).code).toBe(0);
  });

  it('--gateway-url overrides SVC_GATEWAY_URL', async () => {
    expect((await runSvc(['--json', '--gateway-url', svcd.gatewayUrl!, 'gateway', 'tools'], { ...env, SVC_GATEWAY_URL: NO_DAEMON })).code).toBe(0);
  });

  it('an unreachable kernel is exit 3', async () => {
    expect((await runSvc(['--json', 'run', 'list'], { ...env, SVC_KERNEL_URL: NO_DAEMON })).code).toBe(3);
  });
});

describe('D §2: svc keys gen', () => {
  it('writes {key_id, public_key, private_key} with mode 0600; its parts are 32 bytes of base64url', async () => {
    const file = join(dir, 'pub.json');
    const r = await runSvc(['keys', 'gen', '-o', file], env);
    expect(r.code).toBe(0);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const key = JSON.parse(readFileSync(file, 'utf8'));
    expect(Object.keys(key).sort()).toEqual(['key_id', 'private_key', 'public_key']);
    expect(Buffer.from(key.public_key, 'base64url')).toHaveLength(32);
    expect(Buffer.from(key.private_key, 'base64url')).toHaveLength(32);
  });
});

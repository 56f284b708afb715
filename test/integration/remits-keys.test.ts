/**
 * Keys around remits (decisions §2, §11): svcd refuses to start with a bad publisher key from
 * any source, naming it; good keys are trusted from flags, SVC_PUBLISHERS and the config file;
 * after `svcd keys rotate` a remit signed by the previous key still decodes as valid; after a
 * restart with SVC_SIGNING_KEY (decisions §2, §3, §7) the key file's key stays trusted, so a
 * parked run's remit still verifies and its replay is still valid.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { HttpKernelLink } from '../../src/gateway/kernel-link.js';
import { KeyRing, keyFilePath } from '../../src/keys/keyring.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { lockDataDir } from '../../src/store/dir-lock.js';
import { runSvc } from '../helpers/cli.js';
import { ROOT, spawnSvcd, startTestDaemon, tempDir } from '../helpers/daemon.js';
import { clearVerifiedTokenCache, verifyRemit } from '../../src/remit/verify.js';
import { APPROVER, getRun, lease, propose, runToAction, type RunDaemon } from './run-fixtures.js';

const smallOrder = Buffer.from('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa', 'hex').toString('base64url');
const short = Buffer.alloc(31, 7).toString('base64url');

describe('publisher keys at startup (D §2)', () => {
  it('startSvcd refuses a small-order or malformed publisher key, naming it', async () => {
    await expect(startTestDaemon({ kernel: { publishers: [`evil:${smallOrder}`] } })).rejects.toThrow(/publisher key evil: .*small-order/);
    await expect(startTestDaemon({ kernel: { publishers: [`short:${short}`] } })).rejects.toThrow(/publisher key short: public key is 31 bytes/);
  });

  it('the svcd binary exits non-zero, saying why, for a bad key from a flag, SVC_PUBLISHERS or the config file', async () => {
    const good = generatePublisherKey();
    const cfg = join(tempDir(), 'svcd.yaml');
    writeFileSync(cfg, `kernel:\n  publishers:\n    - {key_id: cfgbad, public_key: ${short}}\n`);
    const runs: Array<[string[], Record<string, string>, RegExp]> = [
      [['--publisher', `flagbad:${smallOrder}`], {}, /publisher key flagbad: .*small-order/],
      [[], { SVC_PUBLISHERS: `${good.key_id}:${good.public_key},envbad:${smallOrder}` }, /publisher key envbad: .*small-order/],
      [['--config', cfg], {}, /publisher key cfgbad: public key is 31 bytes/],
    ];
    for (const [args, env, message] of runs) {
      let failed: { status: number | null; stderr: string } | null = null;
      try {
        execFileSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), '--data-dir', tempDir(), '--kernel-listen', '127.0.0.1:0', '--no-gateway', ...args], {
          env: { ...process.env, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
          timeout: 15_000,
        });
      } catch (err) {
        const e = err as { status: number | null; stderr: Buffer };
        failed = { status: e.status, stderr: e.stderr.toString() };
      }
      expect(failed, args.join(' ')).not.toBeNull();
      expect(failed!.status).not.toBe(0);
      expect(failed!.stderr).toMatch(message);
    }
  });

  it('trusts good keys from the flag, SVC_PUBLISHERS and the config file together', async () => {
    const [a, b, c] = [generatePublisherKey(), generatePublisherKey(), generatePublisherKey()];
    const dir = tempDir();
    const cfg = join(dir, 'svcd.yaml');
    writeFileSync(cfg, `kernel:\n  publishers:\n    - {key_id: ${c.key_id}, public_key: ${c.public_key}}\n`);
    await using d = await spawnSvcd(['--data-dir', dir, '--kernel-listen', '127.0.0.1:0', '--no-gateway', '--config', cfg, '--publisher', `${a.key_id}:${a.public_key}`], {
      SVC_PUBLISHERS: `${b.key_id}:${b.public_key}`,
    });
    expect((await fetch(`${d.kernelUrl}/v1/health`)).status).toBe(200);
    const code = await d.stop('SIGTERM');
    expect(code, d.stderr()).toBe(0);
  });
});

describe('rotation and remits (D §2, I 4.1 /keys previous)', () => {
  it('a remit minted before `svcd keys rotate` still decodes as valid; new remits use the new key', async () => {
    const dir = tempDir();
    const args = ['--data-dir', dir, '--kernel-listen', '127.0.0.1:0', '--no-gateway'];
    const mintArgs = ['remit', 'mint', '--tools', 'a.*', '--scopes', 'x:*', '--autonomy', 'observe', '--requested-by', 'i:r:m', '--spend-tokens', '1', '--spend-usd', '0'];
    const first = await spawnSvcd(args);
    const old = (await runSvc(['--kernel-url', first.kernelUrl!, ...mintArgs])).stdout.trim();
    const oldKey = old.split('.')[1];
    expect(await first.stop('SIGTERM')).toBe(0);

    execFileSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), 'keys', 'rotate', '--data-dir', dir], { stdio: 'pipe' });

    await using second = await spawnSvcd(args);
    const keys = (await (await fetch(`${second.kernelUrl}/v1/keys`)).json()) as { key_id: string; previous: Array<{ key_id: string }> };
    expect(keys.key_id).not.toBe(oldKey);
    expect(keys.previous.map((p) => p.key_id)).toContain(oldKey);
    const dec = await runSvc(['--kernel-url', second.kernelUrl!, 'remit', 'decode', old]);
    expect(dec.code, dec.stdout + dec.stderr).toBe(0);
    expect(dec.stdout).toMatch(new RegExp(`^valid: .* signed by ${oldKey}`));
    const fresh = (await runSvc(['--kernel-url', second.kernelUrl!, ...mintArgs])).stdout.trim();
    expect(fresh.split('.')[1]).toBe(keys.key_id);
  });

  it('`svcd keys rotate` beside a running svcd rotates, and says that svcd signs with the old key until it restarts (svcd(8))', async () => {
    const dir = tempDir();
    const args = ['--data-dir', dir, '--kernel-listen', '127.0.0.1:0', '--no-gateway'];
    await using running = await spawnSvcd(args);
    const before = ((await (await fetch(`${running.kernelUrl}/v1/keys`)).json()) as { key_id: string }).key_id;
    const r = spawnSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), 'keys', 'rotate', '--data-dir', dir], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const rotated = JSON.parse(r.stdout) as { key_id: string; previous: string[] };
    expect(rotated.previous).toEqual([before]);
    expect(r.stderr).toBe(`svcd: svcd (pid ${running.child.pid}) is running on ${dir} and signs with the key it started with until it restarts; restart it to sign with ${rotated.key_id} (one started with SVC_SIGNING_KEY goes on signing with that)\n`);
    // The running svcd still holds its data directory and signs with the key it started with.
    expect(((await (await fetch(`${running.kernelUrl}/v1/keys`)).json()) as { key_id: string }).key_id).toBe(before);
    expect(await running.stop('SIGTERM')).toBe(0);

    // With nobody running, a rotation says nothing on stderr; the next svcd signs with the newest key.
    const again = spawnSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), 'keys', 'rotate', '--data-dir', dir], { encoding: 'utf8' });
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toBe('');
    const newest = JSON.parse(again.stdout) as { key_id: string; previous: string[] };
    expect(newest.previous).toEqual([rotated.key_id, before]);
    await using next = await spawnSvcd(args);
    expect(((await (await fetch(`${next.kernelUrl}/v1/keys`)).json()) as { key_id: string }).key_id).toBe(newest.key_id);
  });

  it('a second `svcd keys rotate` while one is rotating is refused, and retires nothing', () => {
    const dir = tempDir();
    const rotate = () => spawnSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), 'keys', 'rotate', '--data-dir', dir], { encoding: 'utf8' });
    const ring = KeyRing.load(dir, undefined); // makes the key, as svcd's first start does
    expect(ring.keyId).toMatch(/^cp-/);
    const release = lockDataDir(join(dir, 'keys'), 'key directory'); // as a rotation in progress holds it
    try {
      const r = rotate();
      expect(r.status).toBe(1);
      expect(r.stderr).toBe(`svcd: another svcd keys rotate (pid ${process.pid}) is rotating the key in ${dir}; run it again when that one is done\n`);
      expect(KeyRing.load(dir, undefined).keyId).toBe(ring.keyId);
    } finally {
      release();
    }
    const ok = rotate();
    expect(ok.status, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).previous).toEqual([ring.keyId]);
  });

  it("the key file's previous keys are checked as configured keys are: a small-order one stops svcd instead of being trusted (D §2)", () => {
    const dir = tempDir();
    KeyRing.load(dir, undefined);
    const file = join(dir, 'keys', 'control-plane.json');
    const good = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    const retired = new KeyRing(Buffer.alloc(32, 3));
    const honest = { key_id: retired.keyId, public_key: retired.publicKey.toString('base64url'), retired_at: '2026-01-01T00:00:00.000Z' };
    const withPrevious = (previous: unknown) => writeFileSync(file, JSON.stringify({ ...good, previous }));
    withPrevious([honest]);
    expect(Buffer.from(KeyRing.load(dir, undefined).lookup(retired.keyId)!)).toEqual(retired.publicKey);
    const cases: Array<[unknown, RegExp]> = [
      [[{ ...honest, key_id: 'cp-evil', public_key: smallOrder }], /previous\[0\] \(cp-evil\): public key is a small-order point .*refusing to trust it/],
      [[honest, { ...honest, public_key: short }], /previous\[1\] \(cp-.*\): public key is 31 bytes/],
      [[{ ...honest, key_id: 'cp-someone-else' }], new RegExp(`previous\\[0\\]: key_id cp-someone-else is not the id of its public key \\(${retired.keyId}\\)`)],
      [[{ key_id: honest.key_id }], /previous\[0\] must have a key_id, a public_key and a retired_at/],
      ['all of them', /previous must be a list of retired keys/],
    ];
    for (const [previous, message] of cases) {
      withPrevious(previous);
      expect(() => KeyRing.load(dir, undefined), JSON.stringify(previous)).toThrow(message);
      expect(() => KeyRing.load(dir, Buffer.alloc(32, 9).toString('base64url')), 'SVC_SIGNING_KEY too').toThrow(message);
    }
    // The binary says so and exits 1, before it listens.
    withPrevious([{ ...honest, key_id: 'cp-evil', public_key: smallOrder }]);
    const r = spawnSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), '--data-dir', dir, '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { encoding: 'utf8', timeout: 15_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/previous\[0\] \(cp-evil\): public key is a small-order point/);
    expect(r.stdout).toBe('');
  });

  it('a truncated key file stops svcd naming the file and what is wrong, not a bare JSON parser message (svcd(8) KEYS)', () => {
    const dir = tempDir();
    KeyRing.load(dir, undefined);
    const file = keyFilePath(dir);
    writeFileSync(file, readFileSync(file, 'utf8').slice(0, 30));
    for (const env of [{}, { SVC_SIGNING_KEY: Buffer.alloc(32, 9).toString('base64url') }]) {
      const r = spawnSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), '--data-dir', dir, '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { encoding: 'utf8', timeout: 15_000, env: { ...process.env, ...env } });
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/^svcd: .*control-plane\.json: the control-plane key file is not JSON \(.*\); restore it from a backup/);
      expect(r.stderr).toContain(file);
      expect(r.stdout).toBe('');
    }
    // Refused before the store is made: nothing half-started is left in the data dir.
    expect(readdirSync(dir).filter((f) => f.startsWith('kernel.db'))).toEqual([]);
  });
});

describe('SVC_SIGNING_KEY over the key file (D §2, D §3 tokens, D §7 signed heads)', () => {
  it("a run parked under the file key keeps a valid replay and a verifying remit after restarts with SVC_SIGNING_KEY, then another value", async () => {
    const dataDir = tempDir();
    const publisher = generatePublisherKey();
    // Each start keeps the store: stopped with close(), not disposed (which removes the directory).
    const start = async (signingKey?: string): Promise<RunDaemon> =>
      Object.assign(await startTestDaemon({ kernel: { dataDir, publishers: [`${publisher.key_id}:${publisher.public_key}`], ...(signingKey ? { signingKey } : {}) } }), { publisher });
    const keysOf = async (d: RunDaemon) => (await d.kernel_('/keys')).body as { key_id: string; previous: Array<{ key_id: string }> };
    const replay = async (d: RunDaemon, runId: string) => (await d.kernel_(`/runs/${runId}/replay`, { method: 'POST' })).body as { chain_valid: boolean; chain_errors: unknown[]; state_matches: boolean };
    /** As the gateway judges a token: with the keys GET /v1/keys publishes. */
    const gatewayVerifies = async (d: RunDaemon, token: string) => {
      clearVerifiedTokenCache();
      const keys = await new HttpKernelLink({ kernelUrl: d.kernelUrl!, token: null }).trustedKeys(token.split('.')[1]);
      return verifyRemit(token, keys, Math.floor(Date.now() / 1000), {});
    };
    const envA = encodeBase64url(Buffer.alloc(32, 0xa1));
    const envB = encodeBase64url(Buffer.alloc(32, 0xb2));
    try {
      const first = await start();
      const fileKey = (await keysOf(first)).key_id;
      const { run_id, lease: l } = await runToAction(first);
      const token = l.context.remit_token as string;
      expect(token.split('.')[1]).toBe(fileKey);
      const parked = await propose(first, l.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 150 } });
      expect(parked.body.decision).toBe('approval_required');
      expect((await getRun(first, run_id)).state).toBe('parked');
      await first.close();

      const second = await start(envA);
      const keys = await keysOf(second);
      expect(keys.key_id).toBe(new KeyRing(Buffer.alloc(32, 0xa1)).keyId);
      expect(keys.previous.map((p) => p.key_id)).toEqual([fileKey]);
      expect(await replay(second, run_id)).toMatchObject({ chain_valid: true, chain_errors: [], state_matches: true });
      expect(await gatewayVerifies(second, token)).toMatchObject({ ok: true });
      // The kernel takes the parked run's token too, and the approved run goes on.
      const note = await second.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: { text: 'still mine' } }, headers: { 'x-svc-remit': token } });
      expect(note.status, JSON.stringify(note.body)).toBe(201);
      const decided = await second.kernel_(`/approvals/${parked.body.approval_id}`, { body: { decision: 'approved', actor: APPROVER, reason: 'ok' } });
      expect(decided.status, JSON.stringify(decided.body)).toBe(200);
      const resumed = await lease(second, ['action']);
      expect(resumed.body.run_id).toBe(run_id);
      expect(await gatewayVerifies(second, resumed.body.context.remit_token)).toMatchObject({ ok: true });
      expect(await replay(second, run_id)).toMatchObject({ chain_valid: true, chain_errors: [] });
      await second.close();
      // Only the public part of SVC_SIGNING_KEY is on disk.
      expect(readFileSync(keyFilePath(dataDir), 'utf8')).not.toContain(envA);

      const third = await start(envB);
      expect((await keysOf(third)).previous.map((p) => p.key_id)).toEqual([keys.key_id, fileKey]);
      expect(await replay(third, run_id)).toMatchObject({ chain_valid: true, chain_errors: [] }); // its head was last signed under envA
      expect(await gatewayVerifies(third, token)).toMatchObject({ ok: true });
      await third.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

/**
 * Keys around remits (decisions §2, §11): svcd refuses to start with a bad publisher key from
 * any source, naming it; good keys are trusted from flags, SVC_PUBLISHERS and the config file;
 * after `svcd keys rotate` a remit signed by the previous key still decodes as valid.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KeyRing } from '../../src/keys/keyring.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { lockDataDir } from '../../src/store/dir-lock.js';
import { runSvc } from '../helpers/cli.js';
import { ROOT, spawnSvcd, startTestDaemon, tempDir } from '../helpers/daemon.js';

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
    expect(r.stderr).toBe(`svcd: svcd (pid ${running.child.pid}) is running on ${dir} and signs with the key it started with until it restarts; restart it to sign with ${rotated.key_id}\n`);
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
});

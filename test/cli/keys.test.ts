/**
 * `svc keys gen|publisher|show` (decisions §2, §11 `--publisher KEY_ID:PUBLIC_KEY`): a publisher key pair file {key_id, public_key, private_key}
 * with mode 0600 that svcd accepts with --publisher, and the kernel's /keys.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { keyPairFromSeed } from '../../src/keys/ed25519.js';
import { parsePublisher, publisherKeyId } from '../../src/keys/publishers.js';
import { NO_DAEMON, runSvc } from '../helpers/cli.js';
import { startTestDaemon, tempDir } from '../helpers/daemon.js';

describe('svc keys (D §2)', () => {
  it('gen -o writes a 0600 key pair file whose key svcd trusts', async () => {
    const file = join(tempDir(), 'publisher.json');
    const r = await runSvc(['keys', 'gen', '-o', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const pair = JSON.parse(readFileSync(file, 'utf8'));
    expect(Object.keys(pair).sort()).toEqual(['key_id', 'private_key', 'public_key']);
    const derived = keyPairFromSeed(Buffer.from(pair.private_key, 'base64url'));
    expect(derived.publicKey.toString('base64url')).toBe(pair.public_key);
    expect(pair.key_id).toBe(publisherKeyId(derived.publicKey));
    expect(pair.key_id).toMatch(/^pub-[A-Za-z0-9_-]{16}$/);
    expect(r.stdout).toContain(`--publisher ${pair.key_id}:${pair.public_key}`);
    expect(parsePublisher(`${pair.key_id}:${pair.public_key}`).key_id).toBe(pair.key_id);
    await using d = await startTestDaemon({ kernel: { publishers: [`${pair.key_id}:${pair.public_key}`] } });
    expect(d.kernel!.publishers.lookup(pair.key_id)).toEqual(new Uint8Array(Buffer.from(pair.public_key, 'base64url')));
  });

  it('gen refuses to overwrite a file unless --force, and --force leaves mode 0600', async () => {
    const file = join(tempDir(), 'existing.json');
    writeFileSync(file, 'keep me', { mode: 0o644 });
    const r = await runSvc(['keys', 'gen', '-o', file]);
    expect(r.code).toBe(1);
    expect(readFileSync(file, 'utf8')).toBe('keep me');
    const f = await runSvc(['--json', 'keys', 'gen', '-o', file, '--force']);
    expect(f.code).toBe(0);
    expect(JSON.parse(f.stdout)).toMatchObject({ file, key_id: expect.stringMatching(/^pub-/) });
    expect(JSON.parse(f.stdout).private_key).toBeUndefined();
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('gen -o DIR says it is a directory and names a file to write, with or without --force', async () => {
    const dir = tempDir();
    for (const extra of [[], ['--force']]) {
      const r = await runSvc(['keys', 'gen', '-o', dir, ...extra]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`svc: ${dir} is a directory; name the key file to write, e.g. ${join(dir, 'publisher.json')}\n`);
    }
  });

  it('gen without -o prints the pair as JSON', async () => {
    const r = await runSvc(['keys', 'gen']);
    expect(r.code).toBe(0);
    const pair = JSON.parse(r.stdout);
    expect(keyPairFromSeed(Buffer.from(pair.private_key, 'base64url')).publicKey.toString('base64url')).toBe(pair.public_key);
  });

  it("show prints the kernel's /keys; --json gives the body; exit 3 when unreachable", async () => {
    await using d = await startTestDaemon();
    const human = await runSvc(['--kernel-url', d.kernelUrl!, 'keys', 'show']);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(d.kernel!.keys.keyId);
    expect(human.stdout).toMatch(/previous\s+none/);
    const json = await runSvc(['--kernel-url', d.kernelUrl!, '--json', 'keys', 'show']);
    expect(JSON.parse(json.stdout)).toEqual((await d.kernel_('/keys')).body);
    const down = await runSvc(['--kernel-url', NO_DAEMON, 'keys', 'show']);
    expect(down.code).toBe(3);
  });

  it('publisher prints the KEY_ID:PUBLIC_KEY svcd trusts, never the private key (D §11 --publisher)', async () => {
    const dir = tempDir();
    const file = join(dir, 'publisher.json');
    expect((await runSvc(['keys', 'gen', '-o', file])).code).toBe(0);
    const pair = JSON.parse(readFileSync(file, 'utf8'));
    const r = await runSvc(['keys', 'publisher', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${pair.key_id}:${pair.public_key}\n`);
    expect(r.stdout).not.toContain(pair.private_key);
    const json = await runSvc(['--json', 'keys', 'publisher', file]);
    expect(JSON.parse(json.stdout)).toEqual({ key_id: pair.key_id, public_key: pair.public_key, publisher: `${pair.key_id}:${pair.public_key}` });
    // The public half alone, as it is handed to an operator, does as well.
    const pub = join(dir, 'public.json');
    writeFileSync(pub, JSON.stringify({ key_id: pair.key_id, public_key: pair.public_key }));
    expect((await runSvc(['keys', 'publisher', pub])).stdout).toBe(r.stdout);
    await using d = await startTestDaemon({ kernel: { publishers: [r.stdout.trim()] } });
    expect(d.kernel!.publishers.lookup(pair.key_id)).toEqual(new Uint8Array(Buffer.from(pair.public_key, 'base64url')));
  });

  it('publisher refuses a file that is not a key, or whose public key is not its private key', async () => {
    const dir = tempDir();
    const other = JSON.parse((await runSvc(['keys', 'gen'])).stdout);
    const mine = JSON.parse((await runSvc(['keys', 'gen'])).stdout);
    const mixed = join(dir, 'mixed.json');
    writeFileSync(mixed, JSON.stringify({ ...mine, public_key: other.public_key }));
    const m = await runSvc(['keys', 'publisher', mixed]);
    expect(m.code).toBe(1);
    expect(m.stderr).toBe(`svc: ${mixed}: key file public_key does not belong to its private_key\n`);
    const notKey = join(dir, 'not-a-key.json');
    writeFileSync(notKey, '{"name": "x"}');
    const n = await runSvc(['keys', 'publisher', notKey]);
    expect(n.code).toBe(1);
    expect(n.stderr).toContain('is not a publisher key file');
    const badPub = join(dir, 'bad-public.json');
    writeFileSync(badPub, JSON.stringify({ key_id: 'k1', public_key: 'AAAA' }));
    const b = await runSvc(['keys', 'publisher', badPub]);
    expect(b.code).toBe(1);
    expect(b.stderr).toMatch(/^svc: .*bad-public\.json: publisher key k1: public key /);
    expect(m.stdout + n.stdout + b.stdout).toBe('');
  });
});

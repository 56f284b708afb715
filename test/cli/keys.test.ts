/**
 * `svc keys gen|show` (decisions §2): a publisher key pair file {key_id, public_key, private_key}
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
});

/**
 * Choosing the kernel's store (svcd(8) --store, kernel.store; decisions §11; docs/design.md
 * "PostgreSQL store"): a postgres:// URL or nothing; the SQLite-only commands (svcd backup,
 * restore) refuse a PostgreSQL kernel with a stable message naming pg_dump; the password
 * never reaches the log; svcd serves from PostgreSQL when one answers.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kernelStoreOf, readConfigFile } from '../../daemon/config.js';
import { Redactor } from '../../src/log/logger.js';
import { ROOT, spawnSvcd, tempDir } from '../helpers/daemon.js';
import { createPgSchema, PG_URL, pgSkip } from '../helpers/pg.js';

const SVCD = join(ROOT, 'dist/daemon/main.js');
const skip = await pgSkip('svcd-store-choice.test');

function svcd(args: string[]) {
  return spawnSync(process.execPath, [SVCD, ...args], { cwd: tempDir(), env: { ...process.env, SVC_TOKEN: '' }, encoding: 'utf8', timeout: 15_000 });
}

describe('svcd --store and kernel.store (svcd(8); D §11)', () => {
  it('takes a postgres:// URL only, and registers its password as a secret', () => {
    const redactor = new Redactor();
    expect(kernelStoreOf('postgres://svc:s3cret-pw@db:5432/svc', '--store', redactor)).toBe('postgres://svc:s3cret-pw@db:5432/svc');
    expect(redactor.redact('password s3cret-pw')).toBe('password [REDACTED]');
    expect(() => kernelStoreOf('/var/lib/svc/kernel.db', '--store', redactor)).toThrow('--store "/var/lib/svc/kernel.db" must be a postgres:// URL');
    const dir = tempDir();
    const file = join(dir, 'svcd.yaml');
    writeFileSync(file, 'kernel:\n  store: mysql://x\n');
    expect(() => readConfigFile(file, {}, redactor)).toThrow('/store');
    writeFileSync(file, 'kernel:\n  store: postgresql://127.0.0.1/svc\n');
    expect(readConfigFile(file, {}, redactor).kernel?.store).toBe('postgresql://127.0.0.1/svc');
  });

  it('an empty --store is refused like every empty flag', () => {
    const r = svcd(['--store', '', '--kernel-listen', '127.0.0.1:0', '--no-gateway']);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('--store is empty');
  });

  it('svcd backup and restore refuse a PostgreSQL kernel and say to use pg_dump; nothing is written', () => {
    const root = tempDir();
    for (const args of [
      ['--store', 'postgres://127.0.0.1/svc', 'backup', join(root, 'out')],
      ['--store', 'postgres://127.0.0.1/svc', 'restore', join(root, 'from')],
    ]) {
      const r = svcd(args);
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toContain("svcd: the kernel's store is PostgreSQL (--store or kernel.store), and svcd backup and restore copy SQLite stores only: back the database up with pg_dump");
    }
    expect(existsSync(join(root, 'out'))).toBe(false);
    const file = join(root, 'svcd.yaml');
    writeFileSync(file, 'kernel:\n  store: postgres://127.0.0.1/svc\n');
    const viaConfig = svcd(['--config', file, 'backup', join(root, 'out')]);
    expect(viaConfig.status).toBe(1);
    expect(viaConfig.stderr).toContain('pg_dump');
  });
});

describe.skipIf(skip)('svcd serving from PostgreSQL (D §11)', () => {
  it('starts on --store, says where its store is without the password, and serves', async () => {
    const schema = await createPgSchema();
    try {
      const url = new URL(PG_URL);
      url.searchParams.set('options', `-c search_path=${schema.schema}`);
      await using d = await spawnSvcd(['--store', url.toString(), '--data-dir', tempDir(), '--kernel-listen', '127.0.0.1:0', '--no-gateway'], { SVC_TOKEN: '' });
      const health = await fetch(`${d.kernelUrl}/v1/health`);
      expect(health.status).toBe(200);
      const ready = d.stderr().split('\n').find((l) => l.includes('"kernel ready"'));
      expect(JSON.parse(ready!)).toMatchObject({ store: expect.stringContaining(url.host) });
    } finally {
      await schema.drop();
    }
  });
});

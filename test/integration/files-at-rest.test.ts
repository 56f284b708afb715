/**
 * What svc leaves on disk is its user's alone, whatever the umask (docs/design.md "Files at
 * rest"): key files 0600 (D §2), the stores in the data directory (D §11: SQLite, WAL) and their
 * -wal and -shm 0600, repair requests (I §2.10) 0600 in a 0700 repairs/, and a data directory
 * made wider beforehand narrowed at start with a warning. Each check runs with umask 000, the
 * most permissive, set around the code that writes (vitest's forks pool allows process.umask).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, linkSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Kernel } from '../../src/kernel/kernel.js';
import { silentLogger } from '../../src/log/logger.js';
import { SqliteDb } from '../../src/store/sqlite-db.js';
import { keepDataDirPrivate } from '../../src/store/private-files.js';
import { writeFileDurably } from '../../src/util/durable-file.js';
import { runSvc } from '../helpers/cli.js';
import { tempDir } from '../helpers/daemon.js';
import { testSigner } from '../helpers/remit-token.js';
import { startGateway } from '../gateway/helpers.js';

const mode = (path: string) => statSync(path).mode & 0o777;
const SHARED_DIR_WARNING =
  'kernel data directory is writable by other users, and svcd leaves it so (another user owns it, or its sticky bit makes it a shared directory such as /tmp): they could replace its key and its stores; give svcd a directory only its user can write';

function recordingLogger(): { warn: (msg: string, fields?: Record<string, unknown>) => void; lines: Array<{ msg: string; fields?: Record<string, unknown> }> } {
  const lines: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
  return { lines, warn: (msg, fields) => lines.push({ msg, fields }) };
}

let savedUmask = 0o022;
beforeEach(() => {
  savedUmask = process.umask(0o000);
});
afterEach(() => {
  process.umask(savedUmask);
});

describe('files at rest: modes whatever the umask (D §2, D §11)', () => {
  it('a new SQLite store and its -wal and -shm are 0600, not SQLite\'s 0644, in a directory others may enter (D §11)', async () => {
    const dir = tempDir('svc-rest-');
    chmodSync(dir, 0o755);
    const path = join(dir, 'kernel.db');
    const db = new SqliteDb({ path });
    try {
      await db.exec('CREATE TABLE t (x)');
      await db.run('INSERT INTO t VALUES (1)');
      for (const f of [path, `${path}-wal`, `${path}-shm`]) expect(mode(f), f).toBe(0o600);
    } finally {
      await db.close();
    }
  });

  it('a repair request is 0600 in a 0700 repairs/ (I §2.10: it quotes the probe and what it saw)', async () => {
    await using g = await startGateway({ keys: testSigner(), env: { SVC_GATEWAY_TEST_TOOLS: '1', SVC_CANARY_QUARANTINE_AFTER: '1' } });
    await g.req('POST', '/test/shape', { shape: { ok: 'yes' } });
    const r = await g.req('POST', '/canaries/test/probe');
    expect(r.body.status).toBe('quarantined');
    const dir = join(g.dataDir, 'repairs');
    expect(mode(dir)).toBe(0o700);
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    expect(mode(join(dir, files[0]!))).toBe(0o600);
  });
});

describe('files at rest: what was left wider is narrowed at start, with a warning (D §2, D §11)', () => {
  function wideDataDir(): string {
    const dir = join(tempDir('svc-rest-'), 'k');
    mkdirSync(dir, { mode: 0o777 });
    mkdirSync(join(dir, 'keys'), { mode: 0o755 });
    writeFileSync(join(dir, 'kernel.db'), '', { mode: 0o644 });
    writeFileSync(join(dir, 'kernel.db-wal'), '', { mode: 0o666 });
    writeFileSync(join(dir, 'keys', 'control-plane.json'), '{}', { mode: 0o640 });
    writeFileSync(join(dir, 'owner.lock'), '', { mode: 0o644 }); // holds a lock, nothing of a run
    writeFileSync(join(dir, 'billing.db'), 'not svc\'s: a connector\'s, beside data_dir: .', { mode: 0o644 });
    mkdirSync(join(dir, 'repairs'), { mode: 0o777 });
    writeFileSync(join(dir, 'repairs', 'billing-2026-11-29T00-00-00.000Z.json'), '{}', { mode: 0o640 });
    return dir;
  }

  it('narrows files to 0600 and directories to 0700, takes write away from others on the directory, and logs both', () => {
    const dir = wideDataDir();
    const outside = join(dir, '..', 'outside.txt');
    writeFileSync(outside, 'x', { mode: 0o644 });
    symlinkSync(outside, join(dir, 'keys', 'link')); // a link is not followed: its target is not svc's
    const log = recordingLogger();
    keepDataDirPrivate(dir, 'kernel data directory', log);
    expect(mode(dir)).toBe(0o755);
    for (const f of ['kernel.db', 'kernel.db-wal', 'keys/control-plane.json', 'repairs/billing-2026-11-29T00-00-00.000Z.json']) expect(mode(join(dir, f)), f).toBe(0o600);
    for (const d of ['keys', 'repairs']) expect(mode(join(dir, d)), d).toBe(0o700);
    expect(mode(join(dir, 'owner.lock'))).toBe(0o644);
    expect(mode(join(dir, 'billing.db'))).toBe(0o644);
    expect(mode(outside)).toBe(0o644);
    expect(log.lines.map((l) => l.msg)).toEqual([
      'kernel data directory was writable by other users; svcd removed their write permission (they could have replaced its key)',
      'files in the kernel data directory were readable by other users; narrowed to the owner (files 0600, directories 0700)',
    ]);
    expect(log.lines[0]!.fields).toEqual({ dir, mode: '0777', now: '0755' });
    expect((log.lines[1]!.fields!.files as string[]).sort()).toEqual(['keys', 'keys/control-plane.json', 'kernel.db', 'kernel.db-wal', 'repairs', 'repairs/billing-2026-11-29T00-00-00.000Z.json'].map((f) => join(dir, f)).sort());
    // Nothing left to do: a second start says nothing.
    const again = recordingLogger();
    keepDataDirPrivate(dir, 'kernel data directory', again);
    expect(again.lines).toEqual([]);
  });

  it('Kernel.open narrows its data directory before it opens the store (D §11)', async () => {
    const dir = join(tempDir('svc-rest-'), 'k');
    const first = await Kernel.open({ dataDir: dir, logger: silentLogger, sweepIntervalMs: 0 });
    await first.close();
    chmodSync(dir, 0o777);
    chmodSync(join(dir, 'kernel.db'), 0o644); // a restore from a tar, a cp by hand
    const log = recordingLogger();
    const kernel = await Kernel.open({ dataDir: dir, logger: { ...silentLogger, warn: log.warn }, sweepIntervalMs: 0 });
    await kernel.close();
    expect(mode(dir)).toBe(0o755);
    expect(mode(join(dir, 'kernel.db'))).toBe(0o600);
    expect(log.lines.map((l) => l.msg)).toContain('files in the kernel data directory were readable by other users; narrowed to the owner (files 0600, directories 0700)');
  });

  // Root may chmod any file: the "not ours" case needs a directory another user owns, as nobody.
  const canDropToNobody = process.getuid?.() === 0 && spawnSync('setpriv', ['--version']).status === 0;
  it.skipIf(!canDropToNobody)('a world-writable directory svcd does not own is reported, not silently used', () => {
    const dir = join(tempDir('svc-rest-'), 'k');
    mkdirSync(dir, { mode: 0o777 });
    chmodSync(join(dir, '..'), 0o755);
    const script = `import(${JSON.stringify(join(import.meta.dirname, '../../dist/src/store/private-files.js'))}).then((m) => m.keepDataDirPrivate(${JSON.stringify(dir)}, 'kernel data directory', { warn: (msg) => console.log(msg) }))`;
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script], { encoding: 'utf8' });
    expect(r.stdout.trim(), r.stderr).toBe(SHARED_DIR_WARNING);
    expect(mode(dir)).toBe(0o777);
  });

  it('a shared directory with the sticky bit (--data-dir /tmp) keeps its mode: svcd warns instead of taking it from everyone', () => {
    const dir = join(tempDir('svc-rest-'), 'k');
    mkdirSync(dir);
    chmodSync(dir, 0o1777);
    const log = recordingLogger();
    keepDataDirPrivate(dir, 'kernel data directory', log);
    expect(statSync(dir).mode & 0o7777).toBe(0o1777);
    expect(log.lines).toEqual([{ msg: SHARED_DIR_WARNING, fields: { dir } }]);
  });
});

describe('files at rest: a key is never written into a file that is already there (D §2)', () => {
  it('writeFileDurably does not follow a symbolic link left at its temp name', () => {
    const dir = tempDir('svc-rest-');
    const file = join(dir, 'control-plane.json');
    const target = join(dir, 'someone-elses.json');
    writeFileSync(target, 'theirs', { mode: 0o644 });
    symlinkSync(target, `${file}.tmp`);
    writeFileDurably(file, '{"private_key":"k"}\n', 0o600);
    expect(readFileSync(target, 'utf8')).toBe('theirs');
    expect(readFileSync(file, 'utf8')).toBe('{"private_key":"k"}\n');
    expect(mode(file)).toBe(0o600);
    expect(existsSync(`${file}.tmp`)).toBe(false);
  });

  it('svc keys gen --force replaces the file: its other names and a link\'s target never see the private key', async () => {
    const dir = tempDir('svc-rest-');
    const file = join(dir, 'publisher.json');
    writeFileSync(file, 'old', { mode: 0o644 });
    linkSync(file, join(dir, 'hard-link.json')); // the same inode: what the old file's readers read
    const r = await runSvc(['keys', 'gen', '-o', file, '--force']);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(dir, 'hard-link.json'), 'utf8')).toBe('old');
    expect(JSON.parse(readFileSync(file, 'utf8')).private_key).toEqual(expect.any(String));
    expect(mode(file)).toBe(0o600);

    const target = join(dir, 'target.json');
    writeFileSync(target, 'not a key', { mode: 0o644 });
    const link = join(dir, 'link.json');
    symlinkSync(target, link);
    const l = await runSvc(['keys', 'gen', '-o', link, '--force']);
    expect(l.code, l.stderr).toBe(0);
    expect(readFileSync(target, 'utf8')).toBe('not a key');
    expect(lstatSync(link).isFile()).toBe(true);
    expect(mode(link)).toBe(0o600);
  });

  it('svc keys gen -o writes 0600 under umask 000 too (D §2)', async () => {
    const file = join(tempDir('svc-rest-'), 'publisher.json');
    const r = await runSvc(['keys', 'gen', '-o', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(mode(file)).toBe(0o600);
  });
});

describe('files at rest: links svcd finds in its data directory (D §2)', () => {
  it('a key file that is a link to a missing file is refused, not replaced by a new key', async () => {
    const dir = join(tempDir('svc-rest-'), 'k');
    mkdirSync(join(dir, 'keys'), { recursive: true, mode: 0o700 });
    const target = join(dir, '..', 'secrets-not-mounted', 'control-plane.json');
    symlinkSync(target, join(dir, 'keys', 'control-plane.json'));
    await expect(Kernel.open({ dataDir: dir, logger: silentLogger, sweepIntervalMs: 0 })).rejects.toThrow(
      `${join(dir, 'keys', 'control-plane.json')} is a symbolic link to ${target}, which does not exist; svcd makes a new control-plane key only where there is no file at all: mount or restore the key, or remove the link`,
    );
    expect(lstatSync(join(dir, 'keys', 'control-plane.json')).isSymbolicLink()).toBe(true);
    expect(existsSync(join(dir, 'kernel.db'))).toBe(false);
  });

  it('svcd.pid left as a link to another file: svcd replaces the link, the other file keeps its contents', async () => {
    const dir = join(tempDir('svc-rest-'), 'k');
    mkdirSync(dir, { mode: 0o700 });
    const precious = join(dir, '..', 'precious');
    writeFileSync(precious, 'precious\n');
    symlinkSync(precious, join(dir, 'svcd.pid'));
    const kernel = await Kernel.open({ dataDir: dir, logger: silentLogger, sweepIntervalMs: 0 });
    try {
      expect(readFileSync(precious, 'utf8')).toBe('precious\n');
      expect(readFileSync(join(dir, 'svcd.pid'), 'utf8')).toBe(`${process.pid}\n`);
    } finally {
      await kernel.close();
    }
  });
});

describe('files at rest: a read-only mount is named as such', () => {
  // Needs a mount: root with CAP_SYS_ADMIN (a container may lack it).
  const mountable = (() => {
    if (process.getuid?.() !== 0) return false;
    const probe = tempDir('svc-rest-mnt-');
    const ok = spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', probe]).status === 0;
    if (ok) spawnSync('umount', [probe]);
    rmSync(probe, { recursive: true, force: true });
    return ok;
  })();
  it.skipIf(!mountable)('a store on a read-only file system says the file system is read-only, not "can this user write it?"', async () => {
    const src = tempDir('svc-rest-');
    await new SqliteDb({ path: join(src, 'kernel.db') }).close();
    const mnt = tempDir('svc-rest-mnt-');
    expect(spawnSync('mount', ['--bind', src, mnt]).status).toBe(0);
    try {
      expect(spawnSync('mount', ['-o', 'remount,bind,ro', mnt]).status).toBe(0);
      const path = join(mnt, 'kernel.db');
      // SQLite's own words vary with what it tried first (open, or the WAL's first write).
      let message = '';
      try {
        new SqliteDb({ path });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(new RegExp(`^cannot open the store ${path}: (unable to open database file|attempt to write a readonly database) \\(the file system it is on is mounted read-only\\)$`));
    } finally {
      spawnSync('umount', [mnt]);
    }
  });
});

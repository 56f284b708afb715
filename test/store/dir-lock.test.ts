/**
 * One process owns a data directory (docs/design.md "Store"; svcd(8) FILES): a second svcd on
 * the same kernel or gateway data directory stops at startup naming the holder. The lock is a
 * file lock the kernel drops when its holder dies, so it holds across pid namespaces (a pid
 * file naming our own pid does not let us in), taking it is atomic (of six starters exactly
 * one wins), and a crash leaves nothing stale behind.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LEGACY_LOCK_FILE, LOCK_FILE, PID_FILE, lockDataDir } from '../../src/store/dir-lock.js';
import { ROOT, spawnSvcd, tempDir } from '../helpers/daemon.js';

/** A pid that is surely not running: a child that has already exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

const HOLDER = `
import { lockDataDir } from ${JSON.stringify(join(ROOT, 'dist/src/store/dir-lock.js'))};
try { lockDataDir(process.argv[1], 'dir'); console.log('held'); } catch (e) { console.log('refused'); process.exit(0); }
setTimeout(() => process.exit(0), Number(process.argv[2]));
`;

/** A child process that tries to take the lock and holds it for `ms`; resolves with its answer. */
function holder(dir: string, ms = 60_000): { child: ChildProcess; answer: Promise<string> } {
  const child = spawn(process.execPath, ['--input-type=module', '-e', HOLDER, dir, String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const answer = new Promise<string>((resolve) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('\n')) resolve(out.trim());
    });
    child.on('exit', () => resolve(out.trim()));
  });
  return { child, answer };
}

const exited = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', () => r())));

describe('lockDataDir', () => {
  it('takes the lock, counts reopens in one process, releases on the last release', () => {
    const dir = tempDir();
    const release = lockDataDir(dir, 'test dir');
    expect(readFileSync(join(dir, PID_FILE), 'utf8').trim()).toBe(String(process.pid));
    const again = lockDataDir(dir, 'test dir');
    release();
    release(); // a second call of one release is a no-op, not a second unref
    expect(existsSync(join(dir, PID_FILE))).toBe(true);
    again();
    expect(existsSync(join(dir, PID_FILE))).toBe(false);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(true); // never removed: see dir-lock.ts
    lockDataDir(dir, 'test dir')();
  });

  it('another live process holds it: refused, naming its pid, even when the pid file names us', async () => {
    const dir = tempDir();
    const h = holder(dir);
    expect(await h.answer).toBe('held');
    expect(() => lockDataDir(dir, 'test dir')).toThrow(`test dir ${dir} is in use by another svcd (pid ${h.child.pid})`);
    // Two containers both run as pid 1: a pid comparison would let the second one in.
    writeFileSync(join(dir, PID_FILE), `${process.pid}\n`);
    expect(() => lockDataDir(dir, 'test dir')).toThrow(/is in use by another svcd/);
    // Killed, it leaves no stale lock: the kernel dropped it.
    h.child.kill('SIGKILL');
    await exited(h.child);
    lockDataDir(dir, 'test dir')();
  });

  it('owner.lock deleted while its owner runs: the next starter is still refused, and the pid file kept (Linux /proc)', async () => {
    const dir = tempDir();
    const h = holder(dir);
    expect(await h.answer).toBe('held');
    rmSync(join(dir, LOCK_FILE)); // an operator taking it for a stale lock
    expect(() => lockDataDir(dir, 'test dir')).toThrow(`test dir ${dir} is in use by another svcd (pid ${h.child.pid}); its owner.lock was deleted while it ran`);
    expect(readFileSync(join(dir, PID_FILE), 'utf8').trim()).toBe(String(h.child.pid));
    h.child.kill('SIGKILL');
    await exited(h.child);
    // Once it is gone, its pid file proves nothing and the directory is free.
    lockDataDir(dir, 'test dir')();
  });

  it('a lock file that cannot be opened is named, with the likely cause', () => {
    const dir = tempDir();
    mkdirSync(join(dir, LOCK_FILE)); // not a file: SQLite cannot open it, as for a user without access
    expect(() => lockDataDir(dir, 'test dir')).toThrow(`cannot open the lock ${join(dir, LOCK_FILE)}: unable to open database file (can this user read and write the file and the directory it is in?)`);
  });

  it('six starters at once, over a lock left by a crashed older svcd: exactly one holds it', async () => {
    // The pid-file lock let two or more of six win in 29 of 30 such starts (read, unlink,
    // create was not atomic).
    const dir = tempDir();
    writeFileSync(join(dir, LEGACY_LOCK_FILE), `${deadPid()}\n`);
    const hs = Array.from({ length: 6 }, () => holder(dir, 3000));
    const answers = await Promise.all(hs.map((h) => h.answer));
    expect(answers.filter((a) => a === 'held')).toHaveLength(1);
    expect(answers.filter((a) => a === 'refused')).toHaveLength(5);
    for (const h of hs) h.child.kill('SIGKILL');
    await Promise.all(hs.map((h) => exited(h.child)));
  });

  it("an older svcd's pid lock file: a live holder is honoured, a dead one's file removed", () => {
    const dir = tempDir();
    writeFileSync(join(dir, LEGACY_LOCK_FILE), `${process.ppid}\n`);
    expect(() => lockDataDir(dir, 'test dir')).toThrow(
      `test dir ${dir} is in use by another svcd (pid ${process.ppid}), per its svcd.lock (the lock of builds before 2026-11-25); if pid ${process.ppid} is not an svcd, delete ${join(dir, LEGACY_LOCK_FILE)}`,
    );
    writeFileSync(join(dir, LEGACY_LOCK_FILE), `${deadPid()}\n`);
    lockDataDir(dir, 'test dir')();
    expect(existsSync(join(dir, LEGACY_LOCK_FILE))).toBe(false);
  });
});

describe('two svcd on one data directory', () => {
  it('the second exits 1 naming the first; after the first stops, a new one starts', async () => {
    const dir = tempDir();
    const args = ['--data-dir', join(dir, 'k'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0'];
    const env = { SVC_TOKEN: '', SVC_GATEWAY_DATA: join(dir, 'g') };
    const first = await spawnSvcd(args, env);
    const second = spawnSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 15_000 });
    expect(second.status).toBe(1);
    expect(second.stderr).toContain(`kernel data directory ${join(dir, 'k')} is in use by another svcd (pid ${first.child.pid})`);
    // Another kernel directory, the same gateway directory: refused too.
    const third = spawnSync(process.execPath, [join(ROOT, 'dist/daemon/main.js'), ...args.map((a) => (a === join(dir, 'k') ? join(dir, 'k2') : a))], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
      timeout: 15_000,
    });
    expect(third.status).toBe(1);
    expect(third.stderr).toContain(`gateway data directory ${join(dir, 'g')} is in use by another svcd (pid ${first.child.pid})`);
    expect(await first.stop()).toBe(0);
    expect(existsSync(join(dir, 'k', PID_FILE))).toBe(false);
    await using fourth = await spawnSvcd(args, env);
    expect(fourth.kernelUrl).not.toBeNull();
  }, 40_000);
});

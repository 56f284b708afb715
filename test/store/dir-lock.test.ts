/**
 * One process owns a data directory (docs/design.md "Store"; svcd(8) FILES): a second svcd on
 * the same kernel or gateway data directory stops at startup naming the holder; a lock left by
 * a dead process is taken over; closing releases it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOCK_FILE, lockDataDir } from '../../src/store/dir-lock.js';
import { ROOT, spawnSvcd, tempDir } from '../helpers/daemon.js';

/** A pid that is surely not running: a child that has already exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

describe('lockDataDir', () => {
  it('takes the lock, refuses a live other holder, takes over a stale one, and releases', () => {
    const dir = tempDir();
    const release = lockDataDir(dir, 'test dir');
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8').trim()).toBe(String(process.pid));
    release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);

    writeFileSync(join(dir, LOCK_FILE), `${process.ppid}\n`); // a live process that is not us
    expect(() => lockDataDir(dir, 'test dir')).toThrow(`test dir ${dir} is in use by another svcd (pid ${process.ppid})`);

    writeFileSync(join(dir, LOCK_FILE), `${deadPid()}\n`);
    const again = lockDataDir(dir, 'test dir');
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8').trim()).toBe(String(process.pid));
    again();
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
    expect(existsSync(join(dir, 'k', LOCK_FILE))).toBe(false);
    await using fourth = await spawnSvcd(args, env);
    expect(fourth.kernelUrl).not.toBeNull();
  }, 40_000);
});

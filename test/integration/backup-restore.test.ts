/**
 * `svcd backup` and `svcd restore` (svcd(8) BACKUP AND RESTORE; decisions §11: the embedded
 * store is SQLite in WAL mode, so a file copy of a running store can miss its latest commits).
 * A backup taken while svcd serves holds every commit acknowledged before it, in files that
 * stand alone; a restore, with svcd stopped, brings the kernel (runs, chains, key) and the
 * gateway (idempotency entries) back to it, and keeps the files it replaced.
 * Runs the built daemon (dist/): npm test builds first.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { KeyRing } from '../../src/keys/keyring.js';
import { GATEWAY_MIGRATIONS } from '../../src/gateway/idempotency.js';
import { KERNEL_MIGRATIONS } from '../../src/store/migrations.js';
import { migrate, SqliteDb } from '../../src/store/sqlite-db.js';
import { callJson, ROOT, spawnSvcd, tempDir } from '../helpers/daemon.js';
import { REQUESTER, refundsBundle } from './run-fixtures.js';

const SVCD = join(ROOT, 'dist/daemon/main.js');

const call = callJson;

function svcd(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [SVCD, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, ...env } });
}

/** A kernel data dir (store and key) at root/state/k and a gateway's at root/state/g, as svcd makes them. */
async function storesUnder(root: string): Promise<{ root: string; k: string; g: string }> {
  const [k, g] = [join(root, 'state/k'), join(root, 'state/g')];
  mkdirSync(k, { recursive: true });
  mkdirSync(g, { recursive: true });
  KeyRing.load(k, undefined);
  for (const [file, migrations] of [[join(k, 'kernel.db'), KERNEL_MIGRATIONS], [join(g, 'gateway.db'), GATEWAY_MIGRATIONS]] as const) {
    const db = new SqliteDb({ path: file });
    await migrate(db, migrations);
    await db.close();
  }
  return { root, k, g };
}

describe('svcd backup and restore (svcd(8) BACKUP AND RESTORE)', () => {
  it('backs up a serving svcd, and a restore brings back its runs, key and idempotency entries', { timeout: 60_000 }, async () => {
    const root = tempDir('svc-backup-');
    const [kernelDir, gatewayDir, backupDir] = ['k', 'g', 'backup'].map((d) => join(root, d)) as [string, string, string];
    const pub = generatePublisherKey();
    const env = { SVC_GATEWAY_DATA: gatewayDir, SVC_GATEWAY_TEST_TOOLS: '1' };
    const args = ['--data-dir', kernelDir, '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--publisher', `${pub.key_id}:${pub.public_key}`];
    const first = await spawnSvcd(args, env);
    const k = first.kernelUrl!;
    const g = first.gatewayUrl!;
    const bundle = refundsBundle();
    const bundleId = (await call(k, '/bundles', { bundle, signature: signBundle(bundle, pub) })).body.bundle_id;
    const newRun = async (invoice: string) => {
      const remit = (await call(k, '/remits', { tools: ['billing.*', 'test.*'], scopes: ['test:*'], spend: { tokens: 1000, usd: 1 }, autonomy: 'autonomous', requested_by: REQUESTER })).body;
      const run = (await call(k, '/runs', { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: invoice }, remit_id: remit.remit_id })).body;
      return { runId: run.run_id as string, token: remit.token as string };
    };
    const kept = await newRun('inv-kept');
    const lease = (await call(k, '/leases', { worker_id: 'w', kinds: ['model'] })).body;
    expect((await call(k, `/leases/${lease.lease_id}/complete`, { output: { amount: 7 }, usage: { tokens: 3, usd: 0.01 } })).status).toBe(200);
    const write = { remit_token: kept.token, run_id: kept.runId, step: 'triage', lease_id: null, tool: 'test.write', args: { n: 1 }, idempotency_key: 'once', scope: null };
    expect((await call(g, '/tools/call', write)).body).toMatchObject({ ok: true, replayed: false, result: { written: { n: 1 } } });
    const keptState = (await call(k, `/runs/${kept.runId}`)).body;
    const keys = (await call(k, '/keys')).body;

    // While svcd serves.
    const b = svcd(['backup', backupDir, '--data-dir', kernelDir, '--gateway-data', gatewayDir]);
    expect(b.status, b.stderr).toBe(0);
    const report = JSON.parse(b.stdout) as { backup: string; files: Array<{ from: string; to: string; bytes: number }> };
    expect(report.backup).toBe(backupDir);
    expect(report.files.map((f) => f.to)).toEqual([join(backupDir, 'kernel/kernel.db'), join(backupDir, 'kernel/keys/control-plane.json'), join(backupDir, 'gateway/gateway.db')]);
    // Standalone files (no -wal to go with them), readable by their owner alone.
    expect(readdirSync(join(backupDir, 'kernel')).sort()).toEqual(['kernel.db', 'keys']);
    const copy = new Database(join(backupDir, 'kernel/kernel.db'), { readonly: true });
    expect(copy.pragma('journal_mode', { simple: true })).toBe('delete');
    expect(copy.prepare('SELECT last_seq FROM runs WHERE run_id = ?').get(kept.runId)).toEqual({ last_seq: keptState.last_seq });
    copy.close();
    expect(statSync(join(backupDir, 'kernel/keys/control-plane.json')).mode & 0o777).toBe(0o600);
    for (const f of ['kernel/kernel.db', 'gateway/gateway.db']) expect(statSync(join(backupDir, f)).mode & 0o777, f).toBe(0o600);
    expect(statSync(backupDir).mode & 0o077).toBe(0);
    // A backup never writes over another.
    const again = svcd(['backup', backupDir, '--data-dir', kernelDir]);
    expect(again.status).toBe(1);
    expect(again.stderr).toBe(`svcd: ${backupDir} exists and is not an empty directory; a backup never writes over another\n`);

    // Work after the backup, which the restore takes back.
    const later = await newRun('inv-later');
    // A restore while svcd runs is refused, nothing changed.
    const refused = svcd(['restore', backupDir, '--data-dir', kernelDir, '--gateway-data', gatewayDir]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(`svcd: svcd (pid ${first.child.pid}) is running on ${kernelDir}: stop it before restoring\n`);
    expect((await call(k, `/runs/${later.runId}`)).status).toBe(200);
    expect(await first.stop()).toBe(0);

    const r = svcd(['restore', backupDir, '--data-dir', kernelDir, '--gateway-data', gatewayDir]);
    expect(r.status, r.stderr).toBe(0);
    const restored = JSON.parse(r.stdout) as { restored: string; stores: Array<{ data_dir: string; replaced: string | null }> };
    expect(restored.stores.map((s) => s.data_dir)).toEqual([kernelDir, gatewayDir]);
    // The replaced store went aside with its log, not deleted.
    const aside = restored.stores[0]!.replaced!;
    expect(aside.startsWith(join(kernelDir, 'replaced-'))).toBe(true);
    expect(existsSync(join(aside, 'kernel.db'))).toBe(true);
    expect(existsSync(join(aside, 'keys/control-plane.json'))).toBe(true);
    expect(existsSync(join(kernelDir, 'kernel.db-wal'))).toBe(false);

    await using second = await spawnSvcd(args, env);
    const k2 = second.kernelUrl!;
    expect((await call(k2, '/keys')).body).toEqual(keys);
    expect((await call(k2, `/runs/${kept.runId}`)).body).toEqual(keptState);
    expect((await call(k2, `/runs/${kept.runId}/replay`, {})).body).toMatchObject({ chain_valid: true, state_matches: true });
    expect((await call(k2, `/runs/${later.runId}`)).status).toBe(404);
    // The gateway remembers the write the backup saw: a repeat is answered, not run again.
    expect((await call(second.gatewayUrl!, '/tools/call', write)).body).toMatchObject({ ok: true, replayed: true, result: { written: { n: 1 } } });

    // A write after the backup, then the kernel alone restored (--no-gateway): the gateway's
    // store still has it, so the step handed out again is answered, not run twice.
    const since = { ...write, idempotency_key: 'since', args: { n: 2 } };
    expect((await call(second.gatewayUrl!, '/tools/call', since)).body).toMatchObject({ ok: true, replayed: false });
    expect(await second.stop()).toBe(0);
    const kernelOnly = svcd(['restore', backupDir, '--data-dir', kernelDir, '--no-gateway'], { SVC_GATEWAY_DATA: '' });
    expect(kernelOnly.status, kernelOnly.stderr).toBe(0);
    expect((JSON.parse(kernelOnly.stdout) as { stores: Array<{ data_dir: string }> }).stores.map((s) => s.data_dir)).toEqual([kernelDir]);
    await using third = await spawnSvcd(args, env);
    expect((await call(third.gatewayUrl!, '/tools/call', since)).body).toMatchObject({ ok: true, replayed: true, result: { written: { n: 2 } } });
  });

  it('says what is wrong with a directory that is no data directory or no backup (exit 1)', () => {
    const root = tempDir('svc-backup-');
    const none = svcd(['backup', join(root, 'out'), '--data-dir', join(root, 'nothing-here')]);
    expect(none.status).toBe(1);
    expect(none.stderr).toBe(`svcd: ${join(root, 'nothing-here')} holds no kernel.db (is it the data directory svcd runs on?)\n`);
    const gatewayOnly = join(root, 'gateway-only');
    mkdirSync(join(gatewayOnly, 'gateway'), { recursive: true });
    const noDir = svcd(['restore', gatewayOnly, '--data-dir', join(root, 'k')], { SVC_GATEWAY_DATA: '' });
    expect(noDir.status).toBe(1);
    expect(noDir.stderr).toBe(`svcd: ${gatewayOnly} holds a gateway store: give --gateway-data DIR (or SVC_GATEWAY_DATA) to restore it there, or --no-gateway to keep the gateway's store as it is\n`);
    const nothing = svcd(['backup', join(root, 'out'), '--no-kernel'], { SVC_GATEWAY_DATA: '' });
    expect(nothing.status).toBe(1);
    expect(nothing.stderr).toBe('svcd: --no-kernel without --gateway-data (or SVC_GATEWAY_DATA) leaves nothing to back up\n');
    const notBackup = svcd(['restore', root, '--data-dir', join(root, 'k')]);
    expect(notBackup.status).toBe(1);
    expect(notBackup.stderr).toBe(`svcd: ${root} holds no kernel/ or gateway/ directory: not a backup made by svcd backup\n`);
    expect(existsSync(join(root, 'k'))).toBe(false);
  });

  it('refuses a backup a byte of which changed, or that did not finish, before touching the data directory', { timeout: 60_000 }, async () => {
    const root = tempDir('svc-backup-');
    const [kernelDir, backupDir] = [join(root, 'k'), join(root, 'b')];
    const pub = generatePublisherKey();
    const first = await spawnSvcd(['--data-dir', kernelDir, '--kernel-listen', '127.0.0.1:0', '--no-gateway', '--publisher', `${pub.key_id}:${pub.public_key}`]);
    const bundle = refundsBundle();
    expect((await call(first.kernelUrl!, '/bundles', { bundle, signature: signBundle(bundle, pub) })).status).toBe(201);
    expect(await first.stop()).toBe(0);
    expect(svcd(['backup', backupDir, '--data-dir', kernelDir]).status).toBe(0);
    // One bit of the bundle's text: the b-trees are sound, quick_check says ok.
    const store = join(backupDir, 'kernel/kernel.db');
    const bytes = readFileSync(store);
    const at = bytes.indexOf('Classify this ticket');
    expect(at).toBeGreaterThan(0);
    bytes[at] ^= 0x01;
    writeFileSync(store, bytes);
    const before = readdirSync(kernelDir).sort();
    const r = svcd(['restore', backupDir, '--data-dir', kernelDir], { SVC_GATEWAY_DATA: '' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(`svcd: ${store} is not the file the backup wrote (its size or SHA-256 differs from manifest.json); nothing was restored\n`);
    expect(readdirSync(kernelDir).sort()).toEqual(before);
    // A backup stopped before its manifest was written is not whole.
    const cut = join(root, 'cut');
    mkdirSync(join(cut, 'kernel/keys'), { recursive: true });
    writeFileSync(join(cut, 'kernel/kernel.db'), readFileSync(join(kernelDir, 'kernel.db')));
    writeFileSync(join(cut, 'kernel/keys/control-plane.json'), readFileSync(join(kernelDir, 'keys/control-plane.json')));
    const c = svcd(['restore', cut, '--data-dir', kernelDir], { SVC_GATEWAY_DATA: '' });
    expect(c.stderr).toBe(`svcd: ${join(cut, 'manifest.json')} is missing: the backup did not finish, or svcd backup did not make it; nothing was restored\n`);
    expect(readdirSync(kernelDir).sort()).toEqual(before);
  });

  it('refuses an empty --data-dir, wherever it stands, instead of restoring into the working directory', () => {
    const cwd = tempDir('svc-backup-cwd-');
    const r = spawnSync(process.execPath, [SVCD, 'restore', join(cwd, 'b'), '--data-dir', '', '--no-gateway'], { cwd, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('svcd: --data-dir is empty (an unset shell variable?); give a value or leave the flag out\n');
    expect(readdirSync(cwd)).toEqual([]);
  });

  it('svcd does not start on a data directory a restore left half-swapped', async () => {
    const root = tempDir('svc-backup-');
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, 'restore-incomplete'), JSON.stringify({ from: '/b/kernel', replaced: join(root, 'replaced-x') }));
    await expect(spawnSvcd(['--data-dir', root, '--kernel-listen', '127.0.0.1:0', '--no-gateway'])).rejects.toThrow('a restore from /b/kernel stopped before it finished');
    expect(existsSync(join(root, 'kernel.db'))).toBe(false);
  });
  it("reads the directories from svcd's --config, as svcd would serve them; --gateway-data with --no-gateway is refused", async () => {
    const { root, k, g } = await storesUnder(tempDir('svc-backup-'));
    const config = join(root, 'svcd.yaml');
    writeFileSync(config, 'kernel:\n  data_dir: state/k\ngateway:\n  data_dir: state/g\n');
    const b = svcd(['--config', config, 'backup', join(root, 'out')], { SVC_GATEWAY_DATA: '' });
    expect(b.status, b.stderr).toBe(0);
    expect((JSON.parse(b.stdout) as { files: Array<{ from: string }> }).files.map((f) => f.from)).toEqual([join(k, 'kernel.db'), join(k, 'keys/control-plane.json'), join(g, 'gateway.db')]);
    const both = svcd(['restore', join(root, 'out'), '--data-dir', k, '--gateway-data', g, '--no-gateway']);
    expect(both.status).toBe(1);
    expect(both.stderr).toBe('svcd: --gateway-data and --no-gateway ask for opposite things: give one\n');
  });
  it("reads no more of svcd's --config than the directories it needs: secrets the backup never uses may be unset", async () => {
    const { root, k, g } = await storesUnder(tempDir('svc-backup-'));
    // The service's environment has these; a cron job's backup does not.
    const config = join(root, 'svcd.yaml');
    writeFileSync(
      config,
      [
        'kernel:',
        '  data_dir: state/k',
        '  token: ${SWEEP_UNSET_KERNEL_TOKEN}',
        'gateway:',
        '  data_dir: state/g',
        '  connectors:',
        '    - name: crm',
        '      type: http',
        '      allowed_hosts: [api.example.com]',
        "      headers: { authorization: 'Bearer ${SWEEP_UNSET_CRM_KEY}' }",
        '',
      ].join('\n'),
    );
    const env = { SVC_GATEWAY_DATA: '' };
    // Every directory given: the config is not needed at all.
    const given = svcd(['--config', config, 'backup', join(root, 'out1'), '--data-dir', k, '--gateway-data', g], env);
    expect(given.stderr).toBe('');
    expect(given.status).toBe(0);
    // The directories from the config: their data_dir is all the backup reads.
    const fromConfig = svcd(['--config', config, 'backup', join(root, 'out2')], env);
    expect(fromConfig.stderr).toBe('');
    expect((JSON.parse(fromConfig.stdout) as { files: Array<{ from: string }> }).files.map((f) => f.from)).toEqual([join(k, 'kernel.db'), join(k, 'keys/control-plane.json'), join(g, 'gateway.db')]);
    // A data_dir that names an unset variable is one clear line.
    writeFileSync(config, 'gateway:\n  data_dir: ${SWEEP_UNSET_GW_DIR}\n');
    const unset = svcd(['--config', config, 'backup', join(root, 'out3'), '--data-dir', k], env);
    expect(unset.status).toBe(1);
    expect(unset.stderr).toMatch(/^svcd: [^\n]*SWEEP_UNSET_GW_DIR is not set[^\n]*\n$/);
  });
  it("svcd's own --no-kernel and --no-gateway, before the command, leave those stores out of a backup and a restore", async () => {
    const { root, k, g } = await storesUnder(tempDir('svc-backup-'));
    const config = join(root, 'svcd.yaml');
    writeFileSync(config, 'kernel:\n  data_dir: state/k\ngateway:\n  data_dir: state/g\n');
    const kernelOnly = svcd(['--config', config, '--no-gateway', 'backup', join(root, 'k-only')], { SVC_GATEWAY_DATA: '' });
    expect(kernelOnly.status, kernelOnly.stderr).toBe(0);
    expect(readdirSync(join(root, 'k-only')).sort()).toEqual(['kernel', 'manifest.json']);
    const both = svcd(['backup', join(root, 'both'), '--data-dir', k, '--gateway-data', g]);
    expect(both.status, both.stderr).toBe(0);
    // A backup holding both, restored with svcd's --no-kernel: the gateway's part alone.
    const target = join(root, 'restored-g');
    const gatewayOnly = svcd(['--no-kernel', 'restore', join(root, 'both'), '--gateway-data', target]);
    expect(gatewayOnly.status, gatewayOnly.stderr).toBe(0);
    expect((JSON.parse(gatewayOnly.stdout) as { stores: Array<{ data_dir: string }> }).stores.map((x) => x.data_dir)).toEqual([target]);
    const neither = svcd(['--no-kernel', 'restore', join(root, 'both'), '--no-gateway']);
    expect(neither.status).toBe(1);
    expect(neither.stderr).toBe(`svcd: nothing to restore: --no-kernel and --no-gateway leave out what ${join(root, 'both')} holds\n`);
  });
});

/**
 * A kernel under test for benchmarks: the built svcd as its own process (as in production,
 * and as the queue baselines' servers are) on port 0 with a temp data dir, a trusted bench
 * publisher, a one-step bundle, and helpers to mint remits and run cycles over HTTP exactly
 * as a worker would.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { packageRoot } from '../../src/version.js';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import type { SqliteSynchronous } from '../../src/store/sqlite-db.js';
import { httpJson } from './http.js';

export const BENCH_BUNDLE = {
  name: 'bench',
  version: '1.0.0',
  description: 'one tool step per run',
  department: 'bench',
  tools: { 'test.echo': { writes: false } },
  workflows: {
    cycle: {
      input_schema: { type: 'object', properties: { i: { type: 'integer' } } },
      steps: [{ id: 'only', kind: 'tool', tool: 'test.echo', args: { i: '{{input.i}}' }, output_schema: { type: 'object' } }],
    },
    // The same step over a bigger run: `pad` rides in the input, the step's args and its output.
    padded: {
      input_schema: { type: 'object', properties: { i: { type: 'integer' }, pad: { type: 'string' } } },
      steps: [{ id: 'only', kind: 'tool', tool: 'test.echo', args: { i: '{{input.i}}', pad: '{{input.pad}}' }, output_schema: { type: 'object' } }],
    },
  },
};

export interface KernelFixture {
  url: string;
  bundleId: string;
  child: ChildProcess;
  post(path: string, body: unknown): Promise<{ status: number; body: any }>;
  mintRemit(): Promise<string>;
  close(): Promise<void>;
}

/**
 * `storePageSize` creates the kernel's store beforehand with that page size, which svcd then
 * keeps (a store keeps the page size it was created with), to compare page sizes.
 */
export async function startKernelFixture(synchronous: SqliteSynchronous = 'FULL', storePageSize?: number): Promise<KernelFixture> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-kernel-'));
  if (storePageSize !== undefined) {
    const db = new Database(join(dataDir, 'kernel.db'));
    db.pragma(`page_size = ${storePageSize}`);
    db.pragma('journal_mode = WAL');
    db.close();
  }
  const pub = generateKeyPair();
  const keyId = 'bench-publisher';
  const config = join(dataDir, 'svcd.yaml');
  writeFileSync(config, `kernel:\n  synchronous: ${synchronous}\n`);
  const child = spawn(
    process.execPath,
    [...(process.env.SVC_BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SVC_BENCH_PROFILE_DIR}`] : []), join(packageRoot(), 'dist/daemon/main.js'), '--config', config, '--data-dir', dataDir, '--kernel-listen', '127.0.0.1:0', '--no-gateway', '--publisher', `${keyId}:${encodeBase64url(pub.publicKey)}`],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, SVC_LOG_LEVEL: 'warn' } },
  );
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`svcd exited ${code} before starting`)));
  });
  const url = `${JSON.parse(line).kernel as string}/v1`;
  const post = (path: string, body: unknown) => httpJson('POST', url + path, body);
  const signature = encodeBase64url(signBytes(pub.seed, Buffer.from(canonicalJson(BENCH_BUNDLE))));
  const b = await post('/bundles', { bundle: BENCH_BUNDLE, signature: { key_id: keyId, signature } });
  if (b.status !== 201 && b.status !== 200) throw new Error(`bundle post failed: ${JSON.stringify(b.body)}`);
  const requested_by = { id: 'bench', role: 'agent', manager: 'lead' };
  return {
    url,
    bundleId: b.body.bundle_id,
    child,
    post,
    async mintRemit() {
      const r = await post('/remits', { tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1_000_000, usd: 1000 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by });
      if (r.status !== 201) throw new Error(`remit mint failed: ${JSON.stringify(r.body)}`);
      return r.body.remit_id as string;
    },
    async close() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const REQUESTER = { id: 'bench', role: 'agent', manager: 'lead' };

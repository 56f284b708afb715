/**
 * End-to-end harness: the built `svcd` (kernel + gateway over the demo billing database) and the
 * built `svc worker` as real processes, driven over HTTP the way an operator would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { parse as parseYaml } from 'yaml';
import { createBillingDb } from '../../quickstart/billing-db.js';
import { signBundle, type PublisherKeyFile } from '../../src/bundle/sign.js';
import { ROOT, spawnSvcd, tempDir, type SpawnedSvcd } from '../helpers/daemon.js';
export { waitOutput } from '../helpers/daemon.js';

export const DEMO_KEY = JSON.parse(readFileSync(join(ROOT, 'fixtures/keys/demo-publisher.json'), 'utf8')) as PublisherKeyFile;
export const REFUNDS_BUNDLE = parseYaml(readFileSync(join(ROOT, 'fixtures/bundles/refunds.yaml'), 'utf8')) as Record<string, any>;
export const REFUNDS_POLICY = readFileSync(join(ROOT, 'fixtures/policies/refunds-v1.policy'), 'utf8');
export const REQUESTER = { id: 'ana', role: 'support', manager: 'support-lead' };
export const FINANCE = { id: 'fin-1', role: 'finance' };

export async function http(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** Like http, but throws unless 2xx. */
export async function ok(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const r = await http(base, method, path, body);
  if (r.status < 200 || r.status >= 300) throw new Error(`${method} ${path} → ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export interface Demo extends AsyncDisposable {
  dir: string;
  dbPath: string;
  svcd: SpawnedSvcd;
  kernelUrl: string;
  gatewayUrl: string;
  /** Rows of the billing database (read-only connection per call). */
  query<T = Record<string, unknown>>(sql: string, ...params: unknown[]): T[];
}

/** svcd with the demo gateway config over a fresh billing database, trusting the demo key. */
export async function startDemoDaemon(env: Record<string, string> = {}): Promise<Demo> {
  const dir = tempDir('svc-e2e-');
  const dbPath = createBillingDb(join(dir, 'billing.db'));
  copyFileSync(join(ROOT, 'fixtures/demo/gateway.yaml'), join(dir, 'gateway.yaml'));
  const svcd = await spawnSvcd([
    '--data-dir', join(dir, 'kernel'),
    '--kernel-listen', '127.0.0.1:0',
    '--gateway-listen', '127.0.0.1:0',
    '--gateway-config', join(dir, 'gateway.yaml'),
    '--publisher', `${DEMO_KEY.key_id}:${DEMO_KEY.public_key}`,
  ], env);
  return {
    dir,
    dbPath,
    svcd,
    kernelUrl: svcd.kernelUrl!,
    gatewayUrl: svcd.gatewayUrl!,
    query<T>(sql: string, ...params: unknown[]): T[] {
      const db = new Database(dbPath, { readonly: true });
      try {
        return db.prepare(sql).all(...params) as T[];
      } finally {
        db.close();
      }
    },
    async [Symbol.asyncDispose]() {
      await svcd.stop('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface WorkerProcess extends AsyncDisposable {
  child: ChildProcess;
  stderr: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** The built `svc worker` as a child process. */
export function spawnWorker(demo: Pick<Demo, 'kernelUrl' | 'gatewayUrl'>, args: string[] = [], env: Record<string, string> = {}): WorkerProcess {
  const child = spawn(process.execPath, [join(ROOT, 'dist/cli/index.js'), '--kernel-url', demo.kernelUrl, '--gateway-url', demo.gatewayUrl, 'worker', '--wait-seconds', '5', ...args], {
    env: { ...process.env, SVC_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  child.stdout!.resume();
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const stop = async (signal: NodeJS.Signals = 'SIGINT') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  return { child, stderr: () => err, stop, [Symbol.asyncDispose]: async () => void (await stop('SIGKILL')) };
}

/** Signs and pushes a bundle with the demo key, pushes the refunds policy (once), mints a remit. */
export async function publish(kernelUrl: string, bundle: Record<string, any>, remit: { grants?: string[]; autonomy?: string; spend?: { tokens: number; usd: number } } = {}): Promise<{ bundle_id: string; remit_id: string }> {
  const pushed = await ok(kernelUrl, 'POST', '/bundles', { bundle, signature: signBundle(bundle, DEMO_KEY) });
  const policy = await http(kernelUrl, 'POST', '/policies', { name: 'refunds', version: '1.0.0', source: REFUNDS_POLICY });
  if (policy.status !== 201 && policy.status !== 200 && policy.status !== 409) throw new Error(`policy push: ${JSON.stringify(policy.body)}`);
  const r = await ok(kernelUrl, 'POST', '/remits', {
    tools: ['billing.*'],
    scopes: ['sql:table:*'],
    grants: remit.grants ?? [],
    spend: remit.spend ?? { tokens: 1_000_000, usd: 50 },
    autonomy: remit.autonomy ?? 'supervised',
    ttl_seconds: 3600,
    policy_set: ['refunds'],
    requested_by: REQUESTER,
  });
  return { bundle_id: pushed.bundle_id, remit_id: r.remit_id };
}

export async function startRun(kernelUrl: string, ids: { bundle_id: string; remit_id: string }, input: Record<string, unknown>, workflow = 'refund'): Promise<string> {
  return (await ok(kernelUrl, 'POST', '/runs', { bundle_id: ids.bundle_id, workflow, input, remit_id: ids.remit_id, requested_by: REQUESTER })).run_id;
}

/** Polls GET /runs/{id} until `pred` holds; returns that state. */
export async function waitRun(kernelUrl: string, runId: string, pred: (s: any) => boolean, ms = 15_000, diag: () => string = () => ''): Promise<any> {
  const end = Date.now() + ms;
  let last: any = null;
  while (Date.now() < end) {
    last = (await http(kernelUrl, 'GET', `/runs/${runId}`)).body;
    if (pred(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  const log = await events(kernelUrl, runId).catch(() => []);
  throw new Error(`run ${runId} did not reach the expected state; last: ${JSON.stringify(last)}\nevents: ${JSON.stringify(log.map((e) => [e.seq, e.kind, e.payload?.step ?? null]))}\n${diag()}`);
}

/** Every event of a run. */
export async function events(kernelUrl: string, runId: string): Promise<any[]> {
  return (await ok(kernelUrl, 'GET', `/runs/${runId}/events?limit=1000`)).events;
}

export const TICKET = {
  ticket_id: 'T-4521',
  customer_id: 'cus_001',
  invoice_id: 'inv_1001',
  message: 'Charged twice for March, please refund. Dana, dana.whitfield@example.com',
};

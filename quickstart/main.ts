#!/usr/bin/env node
/**
 * `npm start`: the whole system on one machine in a few seconds.
 *
 * 1. svcd on the embedded store (data in ./.demo unless --data-dir), its gateway serving the
 *    demo billing database (fixtures/demo/billing.sql through fixtures/demo/gateway.yaml);
 * 2. a worker on the mock provider;
 * 3. the refunds bundle signed with the demo publisher key and pushed, its policy pushed;
 * 4. a supervised remit minted (billing tools, no data grants);
 * 5. a refund run started: it looks the invoice up, the model step triages the ticket (the
 *    customer's name and email redacted before the model), and the refund of 180 parks for a
 *    finance approval. The demo prints what to run in another terminal, waits for the decision,
 *    and prints the outcome and how to replay the run's log. Ctrl-C stops everything.
 *
 * Flags: --data-dir DIR (default ./.demo; wiped at start when it is a previous demo's),
 * --kernel-listen / --gateway-listen HOST:PORT (default 127.0.0.1:7401 / :7402, or free ports
 * when those are taken). Everything it prints is for people; `--json` prints NDJSON events
 * instead (used by the end-to-end tests).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { startSvcd, type RunningSvcd } from '../daemon/server.js';
import { signBundle, type PublisherKeyFile } from '../src/bundle/sign.js';
import { loadGatewayConfig } from '../src/gateway/config.js';
import { createLogger } from '../src/log/logger.js';
import { requestJson, type JsonResponse } from '../src/worker/http.js';
import { MockProvider } from '../src/worker/providers/mock.js';
import { Worker } from '../src/worker/worker.js';
import { createBillingDb, repoRoot } from './billing-db.js';

const MARKER = '.svc-demo';

interface Flags {
  dataDir: string;
  kernelListen: string | null;
  gatewayListen: string | null;
  json: boolean;
}

const HELP = `usage: npm start [-- --data-dir DIR] [--kernel-listen HOST:PORT] [--gateway-listen HOST:PORT] [--json]

Starts svcd on the embedded SQLite store with a gateway in front of a demo billing database,
runs a refund workflow end to end with a worker, and waits for a finance approver.

  --data-dir DIR               kernel and gateway data (default: ./.demo); wiped at start when
                               it holds a previous demo, refused when it holds anything else
  --kernel-listen HOST:PORT    kernel listener (default: 127.0.0.1:7401, or a free port when it
                               is taken; port 0 picks one)
  --gateway-listen HOST:PORT   gateway listener (default: 127.0.0.1:7402, likewise)
  --json                       NDJSON events ({type, ...}) instead of lines for people
  -h, --help                   this text

Ctrl+C stops the demo and svcd. See README.md, "Tour".
`;

function parseFlags(argv: string[]): Flags {
  const f: Flags = { dataDir: './.demo', kernelListen: null, gatewayListen: null, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) usage(`${a} needs a value`);
      return v!;
    };
    if (a === '--data-dir') f.dataDir = value();
    else if (a === '--kernel-listen') f.kernelListen = value();
    else if (a === '--gateway-listen') f.gatewayListen = value();
    else if (a === '--json') f.json = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(HELP);
      process.exit(0);
    } else usage(`unknown flag ${a}`);
  }
  return f;
}

function usage(message: string): never {
  process.stderr.write(`quickstart: ${message}\n`);
  process.exit(2);
}

/** Output: lines for people, or NDJSON `{type, ...}` with --json. */
class Out {
  constructor(private readonly json: boolean) {}
  say(type: string, text: string, data: Record<string, unknown> = {}): void {
    if (this.json) process.stdout.write(JSON.stringify({ type, ...data, text }) + '\n');
    else process.stdout.write(text + '\n');
  }
}

/** Makes the demo data dir fresh: a previous demo's is wiped, anything else is left alone. */
function prepareDataDir(dir: string): string {
  const abs = resolve(dir);
  if (existsSync(abs) && readdirSync(abs).length > 0) {
    if (!existsSync(join(abs, MARKER))) usage(`${abs} exists and is not a previous demo's data; remove it or pass --data-dir`);
    rmSync(abs, { recursive: true, force: true });
  }
  mkdirSync(abs, { recursive: true });
  writeFileSync(join(abs, MARKER), 'svc quickstart data; deleted by the next `npm start`\n');
  return abs;
}

async function startDaemon(dataDir: string, flags: Flags, publisher: PublisherKeyFile): Promise<RunningSvcd> {
  const root = repoRoot();
  const doc = parseYaml(readFileSync(join(root, 'fixtures/demo/gateway.yaml'), 'utf8'));
  const config = loadGatewayConfig(doc, { source: 'fixtures/demo/gateway.yaml', baseDir: dataDir });
  const logStream = createWriteStreamSync(join(dataDir, 'svcd.log'));
  const logger = createLogger({ level: 'info', stream: logStream, base: { svc: 'svcd' } });
  const attempt = (kernelListen: string, gatewayListen: string) =>
    startSvcd({
      token: null,
      logger,
      kernel: { dataDir: join(dataDir, 'kernel'), listen: kernelListen, publishers: [`${publisher.key_id}:${publisher.public_key}`], synchronous: 'NORMAL' },
      gateway: { config, listen: gatewayListen },
    });
  try {
    return await attempt(flags.kernelListen ?? '127.0.0.1:7401', flags.gatewayListen ?? '127.0.0.1:7402');
  } catch (err) {
    const busy = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
    if (!busy || (flags.kernelListen && flags.gatewayListen)) throw err;
    // 7401/7402 are taken (a svcd already runs?): use free ports and say so.
    return attempt(flags.kernelListen ?? '127.0.0.1:0', flags.gatewayListen ?? '127.0.0.1:0');
  }
}

function createWriteStreamSync(path: string): NodeJS.WritableStream {
  writeFileSync(path, '');
  // appendFileSync keeps log lines whole and ordered even when the process exits abruptly.
  return {
    write(chunk: string | Uint8Array) {
      try {
        writeFileSync(path, chunk, { flag: 'a' });
      } catch {
        /* the demo log is best effort */
      }
      return true;
    },
  } as unknown as NodeJS.WritableStream;
}

/** POST/GET against the kernel; throws with the error envelope on a non-2xx answer. */
async function kernelCall(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const res: JsonResponse = await requestJson({ baseUrl: base }, method, path, body);
  if (res.status < 200 || res.status >= 300) {
    const e = res.body?.error;
    throw new Error(`${method} ${path}: HTTP ${res.status}${e ? ` ${e.code}: ${e.message} ${JSON.stringify(e.details ?? {})}` : ''}`);
  }
  return res.body;
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const out = new Out(flags.json);
  const t0 = Date.now();
  const root = repoRoot();
  const dataDir = prepareDataDir(flags.dataDir);
  const publisher = JSON.parse(readFileSync(join(root, 'fixtures/keys/demo-publisher.json'), 'utf8')) as PublisherKeyFile;

  const dbPath = createBillingDb(join(dataDir, 'billing.db'));
  const svcd = await startDaemon(dataDir, flags, publisher);
  const kernelUrl = svcd.kernelUrl!;
  const gatewayUrl = svcd.gatewayUrl!;
  // On other ports than the defaults, the commands it prints name them (svc reads both).
  const env =
    (kernelUrl === 'http://127.0.0.1:7401' ? '' : `SVC_KERNEL_URL=${kernelUrl} `) + (gatewayUrl === 'http://127.0.0.1:7402' ? '' : `SVC_GATEWAY_URL=${gatewayUrl} `);
  out.say('started', `svc quickstart: kernel ${kernelUrl}, gateway ${gatewayUrl}`, { kernel: kernelUrl, gateway: gatewayUrl, data_dir: dataDir });
  out.say('info', `  data in ${dataDir} (daemon log: ${join(dataDir, 'svcd.log')}); billing database ${dbPath}`);

  const worker = new Worker({ kernelUrl, gatewayUrl, provider: new MockProvider(), concurrency: 2, workerId: 'quickstart-worker', waitSeconds: 10 });
  let runId = '';
  worker.on('step:done', (e) => {
    if (e.run_id === runId) out.say('step', `  ✓ step ${e.step} (${e.kind}) completed`, { step: e.step, kind: e.kind, state: 'completed' });
  });
  worker.on('step:error', (e) => {
    if (e.run_id === runId) out.say('step', `  ✗ step ${e.step} failed: ${e.error.code}: ${e.error.message} (${e.outcome ?? 'not reported'})`, { step: e.step, state: 'failed', error: e.error });
  });
  worker.on('step:activity', (e) => {
    if (e.run_id !== runId) return;
    const a = e.activity;
    if (a.type === 'redaction') out.say('redaction', `    data boundary: ${a.count} ${a.class} value(s) at ${a.path} redacted before the model`, { class: a.class, path: a.path, count: a.count });
    if (a.type === 'tool') out.say('tool', `    tool ${a.tool}${a.replayed ? ' (answered from the idempotency store)' : ''}`, { tool: a.tool, replayed: a.replayed });
  });
  worker.start();

  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    out.say('stopping', 'stopping the demo…');
    await worker.stop({ graceMs: 3000 });
    await svcd.close();
    out.say('stopped', 'stopped.');
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));

  try {
    const bundleDoc = parseYaml(readFileSync(join(root, 'fixtures/bundles/refunds.yaml'), 'utf8'));
    const signature = signBundle(bundleDoc, publisher);
    const bundle = await kernelCall(kernelUrl, 'POST', '/bundles', { bundle: bundleDoc, signature });
    out.say('bundle', `✓ bundle ${bundle.name}@${bundle.version} signed with ${publisher.key_id} and pushed (${bundle.bundle_id})`, { bundle_id: bundle.bundle_id });

    const policySource = readFileSync(join(root, 'fixtures/policies/refunds-v1.policy'), 'utf8');
    const policy = await kernelCall(kernelUrl, 'POST', '/policies', { name: 'refunds', version: '1.0.0', source: policySource });
    out.say('policy', `✓ policy ${policy.name}@${policy.version} pushed: refunds over 100 need role:finance`, { policy_id: policy.policy_id });

    const requestedBy = { id: 'ana', role: 'support', manager: 'support-lead' };
    const remit = await kernelCall(kernelUrl, 'POST', '/remits', {
      tools: ['billing.*'],
      scopes: ['sql:table:customers', 'sql:table:invoices', 'sql:table:refunds'],
      grants: [],
      spend: { tokens: 100000, usd: 5 },
      autonomy: 'supervised',
      ttl_seconds: 3600,
      policy_set: ['refunds'],
      requested_by: requestedBy,
    });
    out.say('remit', `✓ remit ${remit.remit_id}: billing.* on customers/invoices/refunds, supervised, no data grants (pii stays redacted), $5`, { remit_id: remit.remit_id });

    const input = {
      ticket_id: 'T-4521',
      customer_id: 'cus_001',
      invoice_id: 'inv_1001',
      message: 'Hi, I was charged twice for March (invoice inv_1001). Please refund the duplicate. Dana (dana.whitfield@example.com)',
    };
    const run = await kernelCall(kernelUrl, 'POST', '/runs', { bundle_id: bundle.bundle_id, workflow: 'refund', input, remit_id: remit.remit_id, requested_by: requestedBy });
    runId = run.run_id;
    out.say('run', `▶ run ${runId} started: refund ticket ${input.ticket_id} for ${input.invoice_id}`, { run_id: runId });
  } catch (err) {
    out.say('error', `quickstart failed: ${(err as Error).message}`);
    await stop(1);
    return;
  }

  // Follow the run until it ends; tell the human what to do while it waits for them.
  let announcedPark = '';
  for (;;) {
    if (stopping) return;
    let state: any;
    try {
      state = await kernelCall(kernelUrl, 'GET', `/runs/${runId}`);
    } catch {
      await sleep(250);
      continue;
    }
    if (state.state === 'parked' && announcedPark !== `${state.parked_reason}:${state.pending_approval_id}`) {
      announcedPark = `${state.parked_reason}:${state.pending_approval_id}`;
      if (state.parked_reason === 'human') {
        const mine = state.pending_approval_id ? await kernelCall(kernelUrl, 'GET', `/approvals/${state.pending_approval_id}`).catch(() => null) : null;
        const action = mine?.action ? `${mine.action.tool} ${JSON.stringify(mine.action.args)}` : 'the refund';
        out.say('parked', `⏸ run ${runId} parked after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${action} needs approval by ${mine?.approver ?? 'role:finance'} (${mine?.rule ?? 'policy'})`, {
          run_id: runId,
          approval_id: state.pending_approval_id,
          kernel: kernelUrl,
        });
        out.say('next', ['', 'Next, in another terminal, decide it as a finance approver:', `  ${env}npx svc approvals --actor fin-1:finance`, `  (or: ${env}npx svc approvals approve ${state.pending_approval_id} --actor fin-1:finance --reason "duplicate charge")`, 'Approve it and this run completes. Ctrl-C stops the demo.', ''].join('\n'));
      } else {
        out.say('parked', `⏸ run ${runId} parked (${state.parked_reason}); resume it with: ${env}npx svc run resume ${runId}`, { run_id: runId, reason: state.parked_reason });
      }
    }
    if (state.state === 'running') announcedPark = '';
    if (['completed', 'failed', 'abandoned'].includes(state.state)) {
      const events = await kernelCall(kernelUrl, 'GET', `/runs/${runId}/events?limit=1000`).catch(() => ({ events: [] }));
      const notes = (events.events ?? []).filter((e: any) => e.kind === 'note' && e.payload?.type === 'redaction').length;
      if (state.state === 'completed') {
        const refund = state.output ?? state.steps?.refund?.output;
        out.say('completed', `✓ run ${runId} completed: refund ${refund?.id ?? ''} of ${refund?.amount ?? '?'} issued for ${refund?.invoice_id ?? ''} (${notes} redaction note(s) in its log)`, { run_id: runId, output: refund ?? null });
      } else {
        out.say(state.state, `run ${runId} ${state.state}: ${state.error ? `${state.error.code}: ${state.error.message}` : ''}`, { run_id: runId, error: state.error ?? null });
      }
      out.say('next', ['', 'Check its signed, hash-chained event log:', `  ${env}npx svc run replay ${runId}`, `  ${env}npx svc run events ${runId}`, 'Ctrl-C stops the demo.'].join('\n'));
      break;
    }
    await sleep(200);
  }
  // Keep serving (for replay and the TUI) until Ctrl-C.
  await new Promise(() => {});
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

void main().catch((err: unknown) => {
  process.stderr.write(`quickstart: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});

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
 * Flags: --data-dir DIR (default ./.demo; wiped at start when it is a previous demo's, refused
 * while that demo still runs),
 * --kernel-listen / --gateway-listen HOST:PORT (default 127.0.0.1:7401 / :7402, or free ports
 * when those are taken). Everything it prints is for people; `--json` prints NDJSON events
 * instead (used by the end-to-end tests).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { parseListen } from '../daemon/config.js';
import { ListenError, startSvcd, type RunningSvcd } from '../daemon/server.js';
import { signBundle, type PublisherKeyFile } from '../src/bundle/sign.js';
import { loadGatewayConfig, type GatewayConfig } from '../src/gateway/config.js';
import { createLogger } from '../src/log/logger.js';
import { DataDirInUseError, LOCK_FILE, PID_FILE, lockDataDir } from '../src/store/dir-lock.js';
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
                               or a demo still running
  --kernel-listen HOST:PORT    kernel listener (default: 127.0.0.1:7401, or a free port when it
                               is taken; port 0 picks one)
  --gateway-listen HOST:PORT   gateway listener (default: 127.0.0.1:7402, likewise)
  --json                       NDJSON events ({type, ...}) instead of lines for people
  -h, --help                   this text

Ctrl+C stops the demo and svcd. See README.md, "Tour". From an installed package (no npm start
there): node "$(npm root -g)/svc/dist/quickstart/main.js" [options] (README.md, "Installed as
a package").
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
    else if (a === '--kernel-listen') f.kernelListen = listenValue(a, value());
    else if (a === '--gateway-listen') f.gatewayListen = listenValue(a, value());
    else if (a === '--json') f.json = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(HELP);
      process.exit(0);
    } else usage(`unknown flag ${a}`);
  }
  return f;
}

/** A malformed address is the caller's mistake: said before anything is touched, like an unknown flag. */
function listenValue(flag: string, value: string): string {
  try {
    parseListen(value);
  } catch (err) {
    usage(`${flag}: ${(err as Error).message}`);
  }
  return value;
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

/**
 * Makes the demo data dir fresh: a previous demo's is wiped, anything else is left alone. A demo
 * still running there is refused before anything is touched: its svcd owns the stores inside
 * (src/store/dir-lock.ts). Their locks stay taken through the wipe, so that a demo starting
 * meanwhile is refused too, until this demo's own svcd takes them over; hence the release.
 */
function prepareDataDir(dir: string, gateway: GatewayConfig): { dataDir: string; release: () => void } {
  const abs = resolve(dir);
  if (existsSync(abs) && readdirSync(abs).length > 0 && !existsSync(join(abs, MARKER))) {
    usage(`${abs} exists and is not a previous demo's data; remove it or pass --data-dir`);
  }
  mkdirSync(abs, { recursive: true });
  // A gateway data dir elsewhere (SVC_GATEWAY_DATA) is not wiped: svcd checks it when it starts.
  const stores = [join(abs, 'kernel'), gateway.data_dir].filter((d) => d.startsWith(abs + sep));
  const release = lockStores(dir, stores);
  wipe(abs, new Set(stores.flatMap((d) => [join(d, LOCK_FILE), join(d, PID_FILE)])));
  writeFileSync(join(abs, MARKER), 'svc quickstart data; deleted by the next `npm start`\n');
  return { dataDir: abs, release };
}

/** Takes every store's lock, or refuses (naming the svcd that holds one) with none taken. */
function lockStores(dir: string, stores: string[]): () => void {
  const releases: Array<() => void> = [];
  const release = () => releases.forEach((r) => r());
  try {
    for (const store of stores) releases.push(lockDataDir(store, 'demo store'));
  } catch (err) {
    release();
    if (!(err instanceof DataDirInUseError)) throw err;
    const who = err.pid === null ? '' : ` (svcd pid ${err.pid})`;
    throw new Error(`a demo is already running in ${dir}${who}; stop it first or pass --data-dir DIR`);
  }
  return release;
}

/** Empties `dir` but for the files in `keep`: a held lock's file is never deleted (dir-lock.ts says why). */
function wipe(dir: string, keep: Set<string>): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (keep.has(path)) continue;
    if ([...keep].some((k) => k.startsWith(path + sep))) wipe(path, keep);
    else rmSync(path, { recursive: true, force: true });
  }
}

/** The demo gateway config (fixtures/demo/gateway.yaml), its relative paths under `dataDir`. */
function demoGatewayConfig(dataDir: string): GatewayConfig {
  const doc = parseYaml(readFileSync(join(repoRoot(), 'fixtures/demo/gateway.yaml'), 'utf8'));
  return loadGatewayConfig(doc, { source: 'fixtures/demo/gateway.yaml', baseDir: resolve(dataDir) });
}

/** A listener's address is taken; `listener` names the flag that moves it. */
class AddressInUseError extends Error {
  constructor(readonly listener: 'kernel' | 'gateway', address: string) {
    super(`the ${listener} address ${address} is in use; pass another --${listener}-listen HOST:PORT (port 0 picks a free one)`);
  }
}

async function startDaemon(dataDir: string, config: GatewayConfig, flags: Flags, publisher: PublisherKeyFile): Promise<RunningSvcd> {
  const logStream = createWriteStreamSync(join(dataDir, 'svcd.log'));
  const logger = createLogger({ level: 'info', stream: logStream, base: { svc: 'svcd' } });
  const attempt = async (kernelListen: string, gatewayListen: string) => {
    try {
      return await startSvcd({
        token: null,
        logger,
        kernel: { dataDir: join(dataDir, 'kernel'), listen: kernelListen, publishers: [`${publisher.key_id}:${publisher.public_key}`], synchronous: 'NORMAL' },
        gateway: { config, listen: gatewayListen },
      });
    } catch (err) {
      throw addressInUse(err) ?? err;
    }
  };
  try {
    return await attempt(flags.kernelListen ?? '127.0.0.1:7401', flags.gatewayListen ?? '127.0.0.1:7402');
  } catch (err) {
    const taken = err instanceof AddressInUseError ? err.listener : null;
    if (taken === null || flags[`${taken}Listen`] !== null) throw err;
    // 7401/7402 are taken (a svcd already runs?): use free ports and say so.
    return attempt(flags.kernelListen ?? '127.0.0.1:0', flags.gatewayListen ?? '127.0.0.1:0');
  }
}

/** EADDRINUSE from either listener; null for any other error. */
function addressInUse(err: unknown): AddressInUseError | null {
  return err instanceof ListenError && err.code === 'EADDRINUSE' ? new AddressInUseError(err.listener, err.address) : null;
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

/** How long a stop waits for requests in flight before closing their connections, ms. */
const DRAIN_MS = 5000;

/**
 * Ctrl-C (SIGINT) or SIGTERM, from the moment the flags are read: stops the worker and svcd (one
 * still starting once it is up), says `stopped.` and exits 0; a second signal while that runs
 * exits at once (130 for SIGINT, 143 for SIGTERM), as `svc worker` stops now on its second.
 * What a stop cuts short (a request whose connection it closed) is its own doing, not a
 * failure: check `requested` before saying so.
 */
class Shutdown {
  requested = false;
  worker: Worker | null = null;
  private svcd: Promise<RunningSvcd | null> = Promise.resolve(null);

  constructor(private readonly out: Out) {
    const onSignal = (signal: NodeJS.Signals) => {
      if (!this.requested) {
        this.stop(0).catch((err: unknown) => {
          process.stderr.write(`quickstart: stopping failed: ${err instanceof Error ? err.message : String(err)}\n`);
          process.exit(1);
        });
        return;
      }
      this.out.say('stopped', 'stopping now.');
      process.exit(signal === 'SIGTERM' ? 143 : 130); // 128 + the signal's number, as a shell reports it
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }

  /** The daemon being started: a stop asked for meanwhile waits for it, then closes it. */
  starting(svcd: Promise<RunningSvcd>): Promise<RunningSvcd> {
    this.svcd = svcd.catch(() => null);
    return svcd;
  }

  async stop(code: number): Promise<void> {
    if (this.requested) return;
    this.requested = true;
    this.out.say('stopping', 'stopping the demo…');
    await this.worker?.stop({ graceMs: 3000 });
    const svcd = await this.svcd;
    // As svcd's own drain does: requests still running after the deadline lose their
    // connection, so a request that never ends cannot hold the demo open; stores that still
    // have not closed 10 s later are given up on (svcd exits 1 then too).
    const cut = setTimeout(() => svcd?.cutOff(), DRAIN_MS);
    const giveUp = setTimeout(() => {
      process.stderr.write('quickstart: the daemon did not close within 10 s of its drain; stopping anyway\n');
      process.exit(1);
    }, DRAIN_MS + 10_000);
    await svcd?.close();
    clearTimeout(cut);
    clearTimeout(giveUp);
    this.out.say('stopped', 'stopped.');
    process.exit(code);
  }
}

async function main(): Promise<void> {
  const flags = parseFlags(process.argv.slice(2));
  const out = new Out(flags.json);
  const shutdown = new Shutdown(out);
  try {
    await runDemo(flags, out, shutdown);
  } catch (err) {
    if (!shutdown.requested) throw err; // else the stop ends the process, as `stopped.`
  }
}

async function runDemo(flags: Flags, out: Out, shutdown: Shutdown): Promise<void> {
  const t0 = Date.now();
  const root = repoRoot();
  const gatewayConfig = demoGatewayConfig(flags.dataDir);
  const { dataDir, release } = prepareDataDir(flags.dataDir, gatewayConfig);
  const publisher = JSON.parse(readFileSync(join(root, 'fixtures/keys/demo-publisher.json'), 'utf8')) as PublisherKeyFile;

  const dbPath = createBillingDb(join(dataDir, 'billing.db'));
  let svcd: RunningSvcd;
  try {
    svcd = await shutdown.starting(startDaemon(dataDir, gatewayConfig, flags, publisher));
  } finally {
    release(); // svcd holds its stores now, or has failed to start
  }
  if (shutdown.requested) return;
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
  shutdown.worker = worker;
  worker.start();

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
    if (shutdown.requested) return;
    out.say('error', `quickstart failed: ${(err as Error).message}`);
    await shutdown.stop(1);
    return;
  }

  // Follow the run until it ends; tell the human what to do while it waits for them.
  let announcedPark = '';
  for (;;) {
    if (shutdown.requested) return;
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
        out.say('parked', `⏸ run ${runId} parked (${state.parked_reason}); resume it with: ${env}npx svc run resume ${runId} --actor ana:support`, { run_id: runId, reason: state.parked_reason });
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

// The mistakes that reach here (a demo already running, an address in use, a gateway config
// problem) are the caller's to fix, said in one line; nothing tells them from bugs, so the
// stack is shown only with SVC_LOG_LEVEL=debug.
void main().catch((err: unknown) => {
  const debug = process.env.SVC_LOG_LEVEL === 'debug' && err instanceof Error && err.stack;
  process.stderr.write(`quickstart: ${debug ? err.stack : err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

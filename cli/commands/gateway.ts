/**
 * `svc gateway`: the tool gateway for operators (interface 4.2, 7.2; decisions §9).
 *   svc gateway tools                 the tool descriptors
 *   svc gateway canaries              canary status per connector
 *   svc gateway probe CONNECTOR       probe now; prints the connector's status
 *   svc gateway release CONNECTOR     release a quarantined connector
 *   svc gateway call TOOL --args JSON|@FILE|@- --remit-token T [--run-id R] [--step S]
 *                    [--lease-id L] [--idempotency-key K] [--scope S]
 * `call` prints the result (the whole answer with --json); a refusal or error exits 1 with
 * the reason on stderr (and the body on stdout with --json).
 */
import type { Command } from 'commander';
import type { CanaryStatus } from '../../src/gateway/canaries.js';
import type { ToolDescriptor } from '../../src/types.js';
import { gatewayClient, globals, output, table } from '../context.js';
import { CliError, EXIT, usageError } from '../exit.js';
import { jsonArgument, type ReadFile } from '../json-argument.js';
import { errorFromBody, isObject, notSvcd, type SvcHttpClient } from '../http-client.js';
import { fit, terminalJson } from '../terminal-text.js';

export async function handleTools(client: SvcHttpClient): Promise<ToolDescriptor[]> {
  return (await client.request<ToolDescriptor[]>('GET', '/tools')).body;
}

export async function handleCanaries(client: SvcHttpClient): Promise<Record<string, CanaryStatus>> {
  const res = await client.request<Record<string, CanaryStatus>>('GET', '/canaries');
  // Another server's JSON ({"weird": 1}) is not a table of one connector named "weird", with
  // --json or without.
  for (const s of Object.values(res.body as Record<string, unknown>)) {
    if (!isObject(s) || typeof s.status !== 'string') throw notSvcd(res.status, client.opts.baseUrl);
  }
  return res.body;
}

export async function handleProbe(client: SvcHttpClient, connector: string): Promise<CanaryStatus> {
  return (await client.request<CanaryStatus>('POST', `/canaries/${encodeURIComponent(connector)}/probe`)).body;
}

export async function handleRelease(client: SvcHttpClient, connector: string): Promise<CanaryStatus> {
  return (await client.request<CanaryStatus>('POST', `/canaries/${encodeURIComponent(connector)}/release`)).body;
}

export interface CallFlags {
  args?: string;
  remitToken?: string;
  runId?: string;
  step?: string;
  leaseId?: string;
  idempotencyKey?: string;
  scope?: string;
}

/** `--args`: inline JSON, `@FILE` or `@-` (stdin); must be a JSON object. */
export function parseArgs(value: string | undefined, readFile?: ReadFile): Record<string, unknown> {
  return value === undefined ? {} : (jsonArgument(value, { flag: '--args', object: true, readFile }) as Record<string, unknown>);
}

/** The 200 body of POST /v1/tools/call. */
export interface CallAnswer {
  ok: true;
  result: unknown;
  scope: string | null;
  scopes: string[];
  replayed: boolean;
  latency_ms: number;
}

export async function handleCall(client: SvcHttpClient, tool: string, f: CallFlags): Promise<CallAnswer> {
  const token = f.remitToken ?? process.env.SVC_REMIT_TOKEN;
  if (!token) throw usageError('a remit token is required: pass --remit-token TOKEN or set SVC_REMIT_TOKEN');
  const body = {
    remit_token: token,
    run_id: f.runId ?? null,
    step: f.step ?? null,
    lease_id: f.leaseId ?? null,
    tool,
    args: parseArgs(f.args),
    idempotency_key: f.idempotencyKey ?? null,
    scope: f.scope ?? null,
  };
  const res = await client.raw('POST', '/tools/call', body);
  if (res.status === 200) return res.body as CallAnswer;
  throw errorFromBody(res.status, res.body, client.opts.baseUrl);
}

function toolsHuman(list: ToolDescriptor[]): string {
  if (list.length === 0) return '(no tools)';
  return table(
    ['TOOL', 'WRITES', 'SCOPE', 'DESCRIPTION'],
    list.map((t) => [t.id, t.writes ? 'yes' : 'no', t.scope_derivation, fit(t.description.split('\n')[0]!, 70)]),
  );
}

function canariesHuman(map: Record<string, CanaryStatus>): string {
  const names = Object.keys(map);
  if (names.length === 0) return '(no connectors)';
  return table(
    ['CONNECTOR', 'STATUS', 'FAILURES', 'LAST PROBE', 'LAST OK', 'LAST ERROR'],
    names.map((n) => {
      const s = map[n]!;
      return [n, s.status, s.consecutive_failures, s.last_probe_at ?? '-', s.last_ok_at ?? '-', s.last_error ?? ''];
    }),
  );
}

function statusHuman(s: CanaryStatus): string {
  const lines = [`${s.connector}: ${s.status} (${s.consecutive_failures} consecutive failure${s.consecutive_failures === 1 ? '' : 's'})`];
  // A released connector keeps its last failure on record (--json has it); shown as current it misleads.
  if (s.status === 'healthy') return lines.join('\n');
  if (s.last_error) lines.push(`last error: ${s.last_error}`);
  const d = s.contract_diff;
  if (d.missing.length) lines.push(`missing: ${d.missing.join(', ')}`);
  if (d.type_mismatch.length) lines.push(`type mismatch: ${d.type_mismatch.map((m) => `${m.field} is ${m.actual}, expected ${m.expected}`).join('; ')}`);
  if (d.unexpected_required.length) lines.push(`upstream now requires: ${d.unexpected_required.join(', ')}`);
  if (s.repair_file) lines.push(`repair request: ${s.repair_file}`);
  return lines.join('\n');
}

/**
 * Why `svc gateway probe` exits 1. A quarantined connector whose probe passed stays
 * quarantined until a release (svc-gateway(5) CANARIES): say so, rather than that the probe
 * failed.
 */
export function probeNotHealthy(connector: string, s: Pick<CanaryStatus, 'status' | 'consecutive_passes'>): string {
  if (s.status === 'quarantined' && s.consecutive_passes > 0) {
    return `the probe of ${connector} passed, but ${connector} stays quarantined until it is released: svc gateway release ${connector}`;
  }
  return `the probe of ${connector} did not pass: ${s.status}`;
}

/** After a release: the runs the quarantine parked are not resumed by it (svc(1), svc run resume). */
export function releasedNote(connector: string): string {
  return `svc: ${connector} released; runs parked while it was quarantined stay parked: resume each with svc run resume RUN_ID --actor ID:ROLE (svc run list --state parked lists them)\n`;
}

export function registerGateway(program: Command): void {
  const gw = program.command('gateway').description('the tool gateway: tools, canaries, probes, releases and calls');

  gw.command('tools')
    .description('list the tool descriptors (GET /v1/tools)')
    .action(async function (this: Command) {
      output(this, await handleTools(gatewayClient(this)), toolsHuman);
    });

  gw.command('canaries')
    .description('canary status of every connector (GET /v1/canaries)')
    .action(async function (this: Command) {
      output(this, await handleCanaries(gatewayClient(this)), canariesHuman);
    });

  gw.command('probe')
    .description('probe a connector now and print its status; exits 1 unless it is healthy')
    .argument('<connector>', 'connector name')
    .action(async function (this: Command, connector: string) {
      const status = await handleProbe(gatewayClient(this), connector);
      output(this, status, statusHuman);
      // For scripts: a connector not healthy after its probe is a failure of the command.
      if (status.status !== 'healthy') throw new CliError(probeNotHealthy(connector, status), EXIT.failed);
    });

  gw.command('release')
    .description('release a quarantined connector')
    .argument('<connector>', 'connector name')
    .action(async function (this: Command, connector: string) {
      const client = gatewayClient(this);
      const human = !globals(this).json;
      // Asked first (for the note below only): the answer of a release is the same healthy
      // status whether the connector was quarantined or not.
      const before = human ? await handleCanaries(client).then((all) => all[connector]?.status, () => undefined) : undefined;
      const status = await handleRelease(client, connector);
      output(this, status, statusHuman);
      // svcd answers a connector that was not quarantined with its status, unchanged.
      if (status.status !== 'healthy' && human) process.stderr.write(`svc: ${connector} is ${status.status}, not quarantined: nothing was released\n`);
      else if (before === 'quarantined' && human) process.stderr.write(releasedNote(connector));
    });

  gw.command('call')
    .description('call a tool through the gateway (POST /v1/tools/call); prints the result')
    .argument('<tool>', 'tool id <connector>.<operation>')
    .option('--args <json>', 'arguments: inline JSON, @FILE or @- (default: {})')
    .option('--remit-token <token>', 'the remit token (default: SVC_REMIT_TOKEN)')
    .option('--run-id <id>', 'the run the call belongs to (required by a run-bound remit)')
    .option('--step <id>', 'the step id, recorded in events')
    .option('--lease-id <id>', 'the lease id, recorded in events')
    .option('--idempotency-key <key>', 'replay the stored result on a repeat')
    .option('--scope <pattern>', 'narrow the call to this scope')
    .addHelpText('after', '\nExample:\n  svc gateway call billing.lookup_invoice --args \'{"invoice_id":"inv_1001"}\' --remit-token "$TOKEN"')
    .action(async function (this: Command, tool: string, f: CallFlags) {
      const answer = await handleCall(gatewayClient(this), tool, f);
      if (globals(this).json) output(this, answer);
      else {
        process.stdout.write(terminalJson(answer.result) + '\n');
        process.stderr.write(`scope ${answer.scopes.join(', ') || '(none)'}; ${answer.replayed ? 'replayed' : 'executed'} in ${answer.latency_ms} ms\n`);
      }
    });
}

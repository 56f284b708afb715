/**
 * `svc remit`: remits on the kernel (interface 2.1, 4.1, 5.3, 5.4; decisions §3).
 *   svc remit mint --tools L --scopes L --autonomy A --requested-by ID:ROLE:MANAGER
 *                  --spend-tokens N --spend-usd X [--grants L] [--policy-set L] [--ttl S]
 *   svc remit derive ID [any of the mint flags]
 *   svc remit show ID
 *   svc remit decode TOKEN|-
 * mint and derive print the token alone on stdout (so `TOKEN=$(svc remit mint …)` works) and
 * the remit id on stderr; decode checks the token against the kernel's /keys (current and
 * previous) and prints one status line, then the payload; it exits 1 unless the token is valid.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { decodeBase64url } from '../../src/encoding/base64url.js';
import type { PublishedKeys } from '../../src/keys/keyring.js';
import { decodeToken } from '../../src/remit/token.js';
import { verifyRemit } from '../../src/remit/verify.js';
import type { RemitPayload, RemitRecord, TrustedKeys } from '../../src/types.js';
import { globals, kernelClient, output, table } from '../context.js';
import { terminalJson } from '../terminal-text.js';
import { CliError, EXIT, usageError } from '../exit.js';
import type { SvcHttpClient } from '../http-client.js';
import { LIST_LIMIT_MAX } from '../list-limit.js';
import { MAX_SPEND_USD, wholeMicroUsd } from '../../src/spend.js';
import { decimalOf, wholeOf } from '../../src/util/number-text.js';
import { parseRef, policyPath } from './policy-ref.js';
import { parseRequestedBy, remitIdArgument } from './remit-args.js';

export { parseRequestedBy, remitIdArgument };
export { registerRemit } from '../register/remit.js';

/** Flags shared by mint and derive, as commander gives them. */
export interface CreateFlags {
  tools?: string[];
  scopes?: string[];
  grants?: string[];
  policySet?: string[];
  spendTokens?: string;
  spendUsd?: string;
  autonomy?: string;
  ttl?: string;
  requestedBy?: string;
  /** Derive only: the child's `exp` / `nbf`. */
  expiresAt?: string;
  notBefore?: string;
}

function intFlag(name: string, v: string, min: number, max: number): number {
  const n = wholeOf(v);
  if (n === null || n < min || n > max) throw usageError(`${name} must be an integer from ${min} to ${max}, got "${v}"`);
  return n;
}

function usdFlag(v: string): number {
  const n = decimalOf(v);
  // The kernel's range (a billion dollars at most) and its unit (whole micro-dollars, which the
  // token states): said here, before a request, like the other flags' ranges.
  if (n === null || n > MAX_SPEND_USD) throw usageError(`--spend-usd must be a number of dollars from 0 to ${MAX_SPEND_USD}, got "${v}"`);
  if (n > 0 && wholeMicroUsd(n) === 0) throw usageError(`--spend-usd ${v} is less than a micro-dollar (0.000001), the smallest amount a budget counts`);
  return n;
}

/** An ISO 8601 time or epoch seconds → epoch seconds (the remit payload's unit). */
function epochFlag(name: string, v: string): number {
  const t = v.trim();
  if (/^\d+$/.test(t)) return Number(t);
  // A time without a zone would be read in this machine's zone: the kernel's is UTC.
  const ms = /^\d{4}-\d{2}-\d{2}T[^Z+-]*(Z|[+-]\d{2}:?\d{2})$/i.test(t) ? Date.parse(t) : Number.NaN;
  if (!Number.isFinite(ms)) throw usageError(`${name} must be an ISO 8601 time with a zone (2026-11-22T10:00:00Z) or epoch seconds, got "${v}"`);
  // Date.parse rolls a day that does not exist on (02-30 is 03-02): the date must be one.
  const [year, month, day] = t.slice(0, 10).split('-').map(Number) as [number, number, number];
  const calendar = new Date(Date.UTC(year, month - 1, day));
  if (calendar.getUTCFullYear() !== year || calendar.getUTCMonth() !== month - 1 || calendar.getUTCDate() !== day) {
    throw usageError(`${name}: ${t.slice(0, 10)} is not a date in the calendar, got "${v}"`);
  }
  return Math.floor(ms / 1000);
}

/**
 * Builds the POST body from the flags; only flags given become members. A derive inherits
 * the rest, a spend member included: `--spend-usd 1` alone keeps what is left of the tokens.
 */
export function createBody(f: CreateFlags, mode: 'mint' | 'derive' = 'mint'): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (f.tools) body.tools = f.tools;
  if (f.scopes) body.scopes = f.scopes;
  if (f.grants) body.grants = f.grants;
  if (f.policySet) body.policy_set = f.policySet;
  if (mode === 'mint' && (f.spendTokens === undefined) !== (f.spendUsd === undefined)) throw usageError('--spend-tokens and --spend-usd go together: give both');
  if (f.spendTokens !== undefined || f.spendUsd !== undefined) {
    const spend: Record<string, number> = {};
    if (f.spendTokens !== undefined) spend.tokens = intFlag('--spend-tokens', f.spendTokens, 0, Number.MAX_SAFE_INTEGER);
    if (f.spendUsd !== undefined) spend.usd = usdFlag(f.spendUsd);
    body.spend = spend;
  }
  if (f.autonomy !== undefined) body.autonomy = f.autonomy;
  if (f.ttl !== undefined) body.ttl_seconds = intFlag('--ttl', f.ttl, 1, 2_592_000);
  if (f.requestedBy !== undefined) body.requested_by = parseRequestedBy(f.requestedBy);
  if (f.expiresAt !== undefined) body.exp = epochFlag('--expires-at', f.expiresAt);
  if (f.notBefore !== undefined) body.nbf = epochFlag('--not-before', f.notBefore);
  return body;
}

export interface CreatedRemit {
  remit_id: string;
  parent_id?: string;
  token: string;
  expires_at: string;
}

/** POST /v1/remits. */
export async function handleMint(client: SvcHttpClient, flags: CreateFlags): Promise<CreatedRemit> {
  const body = createBody(flags);
  const missing = (['tools', 'scopes', 'autonomy', 'requested_by', 'spend'] as const).filter((k) => body[k] === undefined);
  if (missing.length) throw usageError(`remit mint needs ${missing.map((m) => `--${m === 'spend' ? 'spend-tokens and --spend-usd' : m.replace('_', '-')}`).join(', ')}`);
  return (await client.request<CreatedRemit>('POST', '/remits', body, {}, ['remit_id', 'token'])).body;
}

/** POST /v1/remits/{id}/derive. */
export async function handleDerive(client: SvcHttpClient, parentId: string, flags: CreateFlags): Promise<CreatedRemit> {
  const id = remitIdArgument(parentId, 'remit derive');
  return (await client.request<CreatedRemit>('POST', `/remits/${encodeURIComponent(id)}/derive`, createBody(flags, 'derive'), {}, ['remit_id', 'token'])).body;
}

/**
 * Policies of a remit's policy_set that svcd does not hold (yet): the remit is valid, since a
 * policy may be pushed after it, but a run started with it fails with policy_not_found until
 * then. Said at mint rather than at the first run start. Only a 404 is reported.
 */
export async function unpushedPolicies(client: SvcHttpClient, policySet: readonly string[]): Promise<string[]> {
  const notes: string[] = [];
  for (const ref of policySet) {
    try {
      if ((await client.raw('GET', policyPath(ref, '--policy-set'))).status === 404) {
        notes.push(`policy ${ref} is not pushed yet: a run started with this remit fails with policy_not_found until it is (svc policy push FILE --name ${parseRef(ref, '--policy-set').name} --version VERSION)`);
      }
    } catch {
      /* the remit is minted; a note that cannot be had is not an error */
    }
  }
  return notes;
}

/** GET /v1/remits/{id}. */
export async function handleShow(client: SvcHttpClient, id: string): Promise<RemitRecord> {
  remitIdArgument(id, 'remit show');
  return (await client.request<RemitRecord>('GET', `/remits/${encodeURIComponent(id)}`, undefined, {}, ['rid', 'tools'])).body;
}

export interface RemitListFlags {
  /** The kernel's two states, or `all` for no filter. */
  state: 'active' | 'expired' | 'all';
  run?: string;
  parent?: string;
  /** At most this many, newest first. */
  limit: number;
}

/**
 * GET /v1/remits, page after page, until `limit` + 1 records (one more than shown, so a cut
 * list can say so) or the end.
 */
export async function handleList(client: SvcHttpClient, f: RemitListFlags): Promise<RemitRecord[]> {
  const out: RemitRecord[] = [];
  let after: string | null = null;
  do {
    const q = new URLSearchParams();
    if (f.state !== 'all') q.set('state', f.state);
    if (f.run !== undefined) q.set('run_id', f.run);
    if (f.parent !== undefined) q.set('parent_id', f.parent);
    q.set('limit', String(Math.min(500, f.limit + 1 - out.length)));
    if (after) q.set('after', after);
    const page: { remits: RemitRecord[]; next: string | null } = (await client.request<{ remits: RemitRecord[]; next: string | null }>('GET', `/remits?${q}`, undefined, {}, ['remits'])).body;
    out.push(...page.remits);
    after = page.next;
  } while (after && out.length <= f.limit);
  return out;
}

function listTable(list: RemitRecord[]): string {
  if (list.length === 0) return 'no remits';
  return table(
    ['REMIT', 'EXPIRES', 'REQUESTER', 'RUN', 'AUTONOMY', 'TOOLS'],
    list.map((r) => [r.rid, iso(r.exp), r.requested_by.id, r.run_id ?? '-', r.autonomy, r.tools.length ? r.tools.join(',') : '(none)']),
  );
}

export type DecodeStatus = 'valid' | 'expired' | 'not_yet_valid' | 'signature_invalid' | 'malformed';

export interface DecodeReport {
  status: DecodeStatus;
  valid: boolean;
  /** The one status line. */
  line: string;
  detail: string | null;
  /** The payload when the token decodes (also when the signature or time is wrong). */
  payload: RemitPayload | null;
}

/** TrustedKeys from a GET /v1/keys body: the current key and every `previous` one. */
export function trustedFromPublished(k: PublishedKeys): TrustedKeys {
  const map = new Map<string, Uint8Array>();
  const add = (id: unknown, pk: unknown) => {
    const raw = typeof pk === 'string' ? decodeBase64url(pk) : null;
    if (typeof id === 'string' && raw && raw.length === 32) map.set(id, raw);
  };
  add(k.key_id, k.public_key);
  for (const p of Array.isArray(k.previous) ? k.previous : []) add(p.key_id, p.public_key);
  return { lookup: (id) => map.get(id) ?? null };
}

function iso(s: number): string {
  return new Date(s * 1000).toISOString();
}

/** Verifies `token` against published keys at `nowSeconds` (interface 5.3 steps 1–3). */
export function decodeReport(token: string, keys: PublishedKeys, nowSeconds: number): DecodeReport {
  const r = verifyRemit(token, trustedFromPublished(keys), nowSeconds, {});
  const decoded = decodeToken(token);
  const payload = decoded.ok ? decoded.payload : null;
  if (r.ok) {
    const p = r.payload;
    const bound = p.run ? `, bound to run ${p.run}` : '';
    return { status: 'valid', valid: true, line: `valid: remit ${p.rid} signed by ${p.iss}, expires ${iso(p.exp)}${bound}`, detail: null, payload };
  }
  switch (r.reason) {
    case 'remit_expired':
      // The verdict is by this machine's clock, which may not be the gateway's: said so.
      return { status: 'expired', valid: false, line: `expired: remit ${payload!.rid} expired at ${iso(payload!.exp)} (this machine's clock reads ${iso(nowSeconds)})`, detail: r.detail, payload };
    case 'remit_not_yet_valid':
      return { status: 'not_yet_valid', valid: false, line: `not yet valid: remit ${payload!.rid} is valid from ${iso(payload!.nbf)} (this machine's clock reads ${iso(nowSeconds)})`, detail: r.detail, payload };
    case 'signature_invalid':
      return { status: 'signature_invalid', valid: false, line: `signature invalid: ${r.detail}`, detail: r.detail, payload };
    case 'token_malformed':
      return { status: 'malformed', valid: false, line: `malformed: ${r.detail}`, detail: r.detail, payload: null };
    default:
      return { status: 'malformed', valid: false, line: `malformed: ${r.detail}`, detail: r.detail, payload };
  }
}

/** `svc remit decode`: fetches /keys and reports. */
export async function handleDecode(client: SvcHttpClient, token: string, nowSeconds = Math.floor(Date.now() / 1000)): Promise<DecodeReport> {
  const keys = (await client.request<PublishedKeys>('GET', '/keys')).body;
  return decodeReport(token.trim(), keys, nowSeconds);
}

function recordHuman(r: RemitRecord): string {
  const list = (xs: string[]) => (xs.length ? xs.join(', ') : '(none)');
  const rows: Array<[string, string]> = [
    ['remit', r.rid],
    ['parent', r.parent_id ?? '-'],
    ['run', r.run_id ?? '-'],
    ['issuer', r.iss],
    ['issued', iso(r.iat)],
    ['valid', `${iso(r.nbf)} to ${iso(r.exp)}`],
    ['tools', list(r.tools)],
    ['scopes', list(r.scopes)],
    ['grants', list(r.grants)],
    ['spend', `${r.spend.tokens} tokens, ${r.spend.usd} USD`],
    ['autonomy', r.autonomy],
    ['policy_set', list(r.policy_set)],
    ['requested_by', `${r.requested_by.id} (role ${r.requested_by.role}, manager ${r.requested_by.manager})`],
  ];
  return rows.map(([k, v]) => `${k.padEnd(13)}${v}`).join('\n');
}

function printCreated(cmd: Command, r: CreatedRemit): void {
  if (globals(cmd).json) {
    output(cmd, r);
    return;
  }
  process.stdout.write(r.token + '\n');
  process.stderr.write(`remit ${r.remit_id}${r.parent_id ? ` (derived from ${r.parent_id})` : ''} expires ${r.expires_at}\n`);
}

function readToken(arg: string): string {
  let token = arg;
  if (arg === '-') {
    try {
      token = readFileSync(0, 'utf8');
    } catch (err) {
      throw new CliError(`cannot read the token from stdin: ${(err as Error).message}`, EXIT.failed);
    }
  }
  // Nothing to check is a usage error, not a "malformed" token with one part.
  if (token.trim() === '') throw new CliError(arg === '-' ? 'no token on standard input' : 'the token is empty', EXIT.usage);
  if (/^rmt_[0-9A-Za-z]+$/.test(token.trim())) throw usageError(`"${token.trim()}" is a remit id, not a token: \`svc remit show ID\` prints its record`);
  return token.trim();
}



function orderedForPrint(p: RemitPayload): RemitPayload {
  const order = ['rid', 'parent', 'run', 'iss', 'iat', 'nbf', 'exp', 'tools', 'scopes', 'grants', 'spend', 'autonomy', 'policy_set', 'requested_by'];
  const out: Record<string, unknown> = {};
  for (const k of order) if (k in p) out[k] = (p as unknown as Record<string, unknown>)[k];
  for (const [k, v] of Object.entries(p)) if (!(k in out)) out[k] = v;
  const rb = p.requested_by as unknown;
  if (rb && typeof rb === 'object') {
    const r = rb as Record<string, unknown>;
    out.requested_by = { id: r.id, role: r.role, manager: r.manager, ...r };
  }
  return out as unknown as RemitPayload;
}

/**
 * What each `svc remit` command does when it runs. The commands themselves (names, options, help
 * texts) are defined in cli/register/remit.ts, which loads this module only when one of them
 * runs (docs/design.md, "CLI start-up").
 */
export const remitActions = {
  async mint(this: Command, f: CreateFlags) {
    const client = kernelClient(this);
    printCreated(this, await handleMint(client, f));
    for (const line of await unpushedPolicies(client, f.policySet ?? [])) process.stderr.write(`svc: warning: ${line}\n`);
  },

  async derive(this: Command, id: string, f: CreateFlags) {
    printCreated(this, await handleDerive(kernelClient(this), id, f));
  },

  async list(this: Command, f: RemitListFlags) {
    const fetched = await handleList(kernelClient(this), f);
    output(this, fetched.slice(0, f.limit), listTable);
    if (fetched.length > f.limit) process.stderr.write(`svc: showing the newest ${f.limit}; there are more (raise --limit, up to ${LIST_LIMIT_MAX})\n`);
  },

  async show(this: Command, id: string) {
    output(this, await handleShow(kernelClient(this), id), recordHuman);
  },

  async decode(this: Command, tokenArg: string) {
    const report = await handleDecode(kernelClient(this), readToken(tokenArg));
    const payload = report.payload ? orderedForPrint(report.payload) : null;
    if (globals(this).json) output(this, { status: report.status, valid: report.valid, detail: report.detail, payload });
    else process.stdout.write(report.line + '\n' + (payload ? terminalJson(payload) + '\n' : ''));
    if (!report.valid) throw new CliError(`the token is not valid (${report.status.replace(/_/g, ' ')})`, EXIT.failed);
  },
};

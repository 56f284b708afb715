/**
 * Remits on the kernel (interface 2.1, 4.1, 5.4; decisions §3, 8.3): mint, derive with every
 * narrowing rule, read, and bind to a run. Tokens are signed with the control-plane key;
 * verification of presented tokens goes through `verifyRemit` (verify.ts).
 */
import { epochSeconds, isoTime, type Clock } from '../clock.js';
import { canonicalJson } from '../encoding/canonical-json.js';
import { SvcError, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { decodeCursor, encodeCursor } from '../kernel/cursor.js';
import { usdMicro, usdMicroUp } from '../spend.js';
import type { SqlDb } from '../store/sql-db.js';
import { AUTONOMY_ORDER, sameRequester, type RemitCallCheck, type RemitPayload, type RemitRecord, type Spend, type TrustedKeys, type VerifyResult } from '../types.js';
import { uncoveredScope, uncoveredTool } from './patterns.js';
import { parseDeriveRequest, parseMintRequest, type DeriveRequest } from './requests.js';
import { MAX_TOKEN_LENGTH, encodeCanonicalToken, encodeToken, type TokenSigner } from './token.js';
import { verifyRemit } from './verify.js';

/** What the service needs from the kernel (the Kernel itself satisfies it). */
export interface RemitServiceDeps {
  db: SqlDb;
  keys: TokenSigner & TrustedKeys;
  clock: Clock;
  options: { clockSkewSeconds?: number };
  /**
   * What the run a remit is bound to has spent so far, read in the caller's transaction. The
   * run engine owns runs, so it answers; without it (the remit service on its own) a bound
   * remit counts as unspent.
   */
  spentByRun?(db: SqlDb, runId: string): Promise<Spend>;
}

/** GET /v1/remits query (svcd(8)). */
export interface RemitListQuery {
  state?: 'active' | 'expired';
  run_id?: string;
  parent_id?: string;
  /** 1 to 500 (the route's default: 50). */
  limit: number;
  after?: string;
}

/** 201 body of POST /v1/remits. */
export interface MintResult {
  remit_id: string;
  token: string;
  expires_at: string;
}

/** 201 body of POST /v1/remits/{id}/derive. */
export interface DeriveResult extends MintResult {
  parent_id: string;
}

/** What `row` reads: everything but the tokens, which only `tokenFor` needs (each ≈600 characters to decode). */
interface RemitRow {
  remit_id: string;
  parent_id: string | null;
  run_id: string | null;
  payload: string;
  bound_payload: string | null;
  spend_tokens: number;
  spend_usd_micro: number;
  reserved_tokens: number;
  reserved_usd_micro: number;
  exp: number;
}

/** Room a run-bound token needs beyond the unbound one (`"run":"run_…"`, re-signed). */
const BINDING_HEADROOM = 256;


/** The payload with its members in interface 2.1 order (JSON from the store is sorted). */
export function orderedPayload(p: RemitPayload): RemitPayload {
  const out: Partial<RemitPayload> = { rid: p.rid };
  if (p.parent !== undefined) out.parent = p.parent;
  if (p.run !== undefined) out.run = p.run;
  Object.assign(out, {
    iss: p.iss,
    iat: p.iat,
    nbf: p.nbf,
    exp: p.exp,
    tools: p.tools,
    scopes: p.scopes,
    grants: p.grants,
    spend: { tokens: p.spend.tokens, usd: p.spend.usd },
    autonomy: p.autonomy,
    policy_set: p.policy_set,
    requested_by: { id: p.requested_by.id, role: p.requested_by.role, manager: p.requested_by.manager },
  });
  return out as RemitPayload;
}

/** GET /v1/remits/{id}'s record: the current payload (run-bound once bound), parent and run. */
function recordOf(row: Pick<RemitRow, 'parent_id' | 'run_id' | 'payload' | 'bound_payload'>): RemitRecord {
  return { ...orderedPayload(JSON.parse(row.bound_payload ?? row.payload) as RemitPayload), parent_id: row.parent_id, run_id: row.run_id };
}

function widens(field: string, message: string, details: Record<string, unknown> = {}): SvcError {
  return new SvcError('remit_widens', message, { field, ...details });
}

export class RemitService {
  constructor(private readonly k: RemitServiceDeps) {}

  private now(): number {
    return epochSeconds(this.k.clock);
  }

  private skew(): number {
    const s = this.k.options.clockSkewSeconds;
    return typeof s === 'number' && Number.isFinite(s) && s > 0 ? s : 0;
  }

  private sign(payload: RemitPayload): string {
    const token = encodeToken(payload, this.k.keys);
    if (token.length + BINDING_HEADROOM > MAX_TOKEN_LENGTH) {
      throw new SvcError('request_invalid', `the remit would be a ${token.length}-character token; tokens are limited to ${MAX_TOKEN_LENGTH - BINDING_HEADROOM} characters before binding`, { path: '' });
    }
    return token;
  }

  private async row(db: SqlDb, remitId: string): Promise<RemitRow> {
    const row = await db.get<RemitRow>(
      `SELECT r.remit_id, r.parent_id, b.run_id, r.payload, b.bound_payload,
              r.spend_tokens, r.spend_usd_micro, r.reserved_tokens, r.reserved_usd_micro, r.exp
       FROM remits r LEFT JOIN remit_bindings b ON b.remit_id = r.remit_id WHERE r.remit_id = ?`,
      [remitId],
    );
    if (!row) throw notFound('remit', remitId);
    return row;
  }

  private async insert(db: SqlDb, payload: RemitPayload, token: string): Promise<void> {
    await db.run(
      `INSERT INTO remits (remit_id, parent_id, run_id, payload, token, spend_tokens, spend_usd_micro, exp, created_at)
       VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?)`,
      [payload.rid, payload.parent ?? null, canonicalJson(payload), token, payload.spend.tokens, usdMicro(payload.spend.usd), payload.exp, isoTime(this.k.clock.now())],
    );
  }

  /** POST /v1/remits: validates the body (400 request_invalid) and issues a signed remit. */
  async mint(body: unknown): Promise<MintResult> {
    const req = parseMintRequest(body);
    const now = this.now();
    const payload: RemitPayload = {
      rid: newId('remit', this.k.clock.now()),
      iss: this.k.keys.keyId,
      iat: now,
      nbf: now,
      exp: now + req.ttl_seconds,
      tools: req.tools,
      scopes: req.scopes,
      grants: req.grants,
      spend: req.spend,
      autonomy: req.autonomy,
      policy_set: req.policy_set,
      requested_by: req.requested_by,
    };
    const token = this.sign(payload);
    await this.insert(this.k.db, payload, token);
    return { remit_id: payload.rid, token, expires_at: isoTime(payload.exp * 1000) };
  }

  /**
   * POST /v1/remits/{id}/derive: a child that is a subset of the parent in every field
   * (interface 5.4; 422 remit_widens with details.field), unbound, recording `parent`, with
   * its spend reserved from the parent's remaining budget: its spend less other children's
   * reservations and its run's usage (decisions §3, 8.3).
   */
  async derive(parentId: string, body: unknown): Promise<DeriveResult> {
    const req = parseDeriveRequest(body);
    return this.k.db.tx(async (db) => {
      const row = await this.row(db, parentId);
      const parent = JSON.parse(row.payload) as RemitPayload;
      const now = this.now();
      if (now - this.skew() >= parent.exp) {
        throw new SvcError('remit_invalid', `remit ${parentId} expired at ${isoTime(parent.exp * 1000)}; nothing can be derived from it`, { remit_id: parentId, reason: 'remit_expired' });
      }

      const tools = req.tools ?? parent.tools;
      const badTool = uncoveredTool(parent.tools, tools);
      if (badTool !== null) throw widens('tools', `tool pattern ${badTool} is not covered by the parent's tools`, { value: badTool });

      const scopes = req.scopes ?? parent.scopes;
      const badScope = uncoveredScope(parent.scopes, scopes);
      if (badScope !== null) throw widens('scopes', `scope pattern ${badScope} is not covered by the parent's scopes`, { value: badScope });

      const grants = req.grants ?? parent.grants;
      const badGrant = grants.find((g) => !parent.grants.includes(g));
      if (badGrant !== undefined) throw widens('grants', `grant ${badGrant} is not granted by the parent`, { value: badGrant });

      // What is left: the spend, less what other children reserved and what the parent's own
      // run has used (a derive may never hand out budget the parent already spent).
      const used = row.run_id !== null && this.k.spentByRun ? await this.k.spentByRun(db, row.run_id) : { tokens: 0, usd: 0 };
      const spend = narrowedSpend(req.spend, parent.spend, row, used);

      const autonomy = req.autonomy ?? parent.autonomy;
      if (AUTONOMY_ORDER.indexOf(autonomy) > AUTONOMY_ORDER.indexOf(parent.autonomy)) {
        throw widens('autonomy', `autonomy ${autonomy} is above the parent's ${parent.autonomy}`, { value: autonomy });
      }

      const { exp, nbf } = narrowedTimes(req, parent, now);

      const policySet = req.policy_set ?? parent.policy_set;
      const dropped = parent.policy_set.find((p) => !policySet.includes(p));
      if (dropped !== undefined) throw widens('policy_set', `policy ${dropped} of the parent is missing; removing a policy widens the remit`, { value: dropped });

      if (req.requested_by && !sameRequester(req.requested_by, parent.requested_by)) {
        throw widens('requested_by', 'requested_by differs from the parent\'s; a derived remit keeps its requester', { value: req.requested_by });
      }

      const payload: RemitPayload = {
        rid: newId('remit', this.k.clock.now()),
        parent: parent.rid,
        iss: this.k.keys.keyId,
        iat: now,
        nbf,
        exp,
        tools: [...tools],
        scopes: [...scopes],
        grants: [...grants],
        spend,
        autonomy,
        policy_set: [...policySet],
        requested_by: { ...parent.requested_by },
      };
      const token = this.sign(payload);
      await this.insert(db, payload, token);
      await db.run('UPDATE remits SET reserved_tokens = reserved_tokens + ?, reserved_usd_micro = reserved_usd_micro + ? WHERE remit_id = ?', [spend.tokens, usdMicro(spend.usd), parentId]);
      return { remit_id: payload.rid, parent_id: parentId, token, expires_at: isoTime(exp * 1000) };
    });
  }

  /** GET /v1/remits/{id}: the payload (with `run` once bound) plus parent_id and run_id. */
  async get(remitId: string): Promise<RemitRecord> {
    return recordOf(await this.row(this.k.db, remitId));
  }

  /**
   * GET /v1/remits: remit records as GET /v1/remits/{id} gives them, newest first (ids sort by
   * creation, decisions §1), `{remits, next}`. `state` is `active` (exp not passed) or
   * `expired`; `run_id` lists the remit bound to a run, `parent_id` the children of a remit.
   */
  async list(q: RemitListQuery): Promise<{ remits: RemitRecord[]; next: string | null }> {
    const where: string[] = [];
    const params: Array<string | number> = [];
    if (q.state === 'active') where.push('r.exp > ?');
    if (q.state === 'expired') where.push('r.exp <= ?');
    if (q.state) params.push(this.now());
    if (q.run_id !== undefined) (where.push('b.run_id = ?'), params.push(q.run_id));
    if (q.parent_id !== undefined) (where.push('r.parent_id = ?'), params.push(q.parent_id));
    if (q.after !== undefined) (where.push('r.remit_id < ?'), params.push(decodeCursor(q.after)));
    const rows = await this.k.db.all<Pick<RemitRow, 'parent_id' | 'run_id' | 'payload' | 'bound_payload'>>(
      `SELECT r.parent_id, b.run_id, r.payload, b.bound_payload
       FROM remits r LEFT JOIN remit_bindings b ON b.remit_id = r.remit_id
       ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY r.remit_id DESC LIMIT ?`,
      [...params, q.limit + 1],
    );
    const page = rows.slice(0, q.limit).map(recordOf);
    return { remits: page, next: rows.length > q.limit ? encodeCursor(page[page.length - 1]!.rid) : null };
  }

  /** The current payload: run-bound once bound (404 not_found for an unknown id). */
  async getPayload(remitId: string): Promise<RemitPayload> {
    const row = await this.row(this.k.db, remitId);
    return orderedPayload(JSON.parse(row.bound_payload ?? row.payload) as RemitPayload);
  }

  /** The current token: the run-bound one once bound, else the token issued at mint/derive. */
  async tokenFor(remitId: string): Promise<string> {
    const row = await this.k.db.get<{ token: string; bound_token: string | null }>(
      'SELECT r.token, b.bound_token FROM remits r LEFT JOIN remit_bindings b ON b.remit_id = r.remit_id WHERE r.remit_id = ?',
      [remitId],
    );
    if (!row) throw notFound('remit', remitId);
    return row.bound_token ?? row.token;
  }

  /** Spend reserved from this remit by its derived children (decisions 8.3). */
  async reserved(remitId: string, db: SqlDb = this.k.db): Promise<Spend> {
    // Two numbers, asked on every lease and completion: not the row's four token texts.
    const row = await db.get<{ reserved_tokens: number; reserved_usd_micro: number }>('SELECT reserved_tokens, reserved_usd_micro FROM remits WHERE remit_id = ?', [remitId]);
    if (!row) throw notFound('remit', remitId);
    return { tokens: Number(row.reserved_tokens), usd: Number(row.reserved_usd_micro) / 1_000_000 };
  }

  /**
   * Binds the remit to a run inside the caller's transaction (decisions §3): 404 not_found,
   * 409 remit_bound when it is already bound, 422 remit_invalid when it is expired or not yet
   * valid. Issues the run-bound token: same rid, the payload plus `run`, signed with the
   * current key.
   */
  async bindToRun(db: SqlDb, remitId: string, runId: string): Promise<{ token: string; payload: RemitPayload; payloadText: string }> {
    const row = await this.row(db, remitId);
    if (row.run_id !== null) throw new SvcError('remit_bound', `remit ${remitId} is already bound to run ${row.run_id} (a remit serves one run: mint or derive another for this one)`, { remit_id: remitId, run_id: row.run_id });
    const base = JSON.parse(row.payload) as RemitPayload;
    const now = this.now();
    if (now - this.skew() >= base.exp) {
      throw new SvcError('remit_invalid', `remit ${remitId} expired at ${isoTime(base.exp * 1000)}`, { remit_id: remitId, reason: 'remit_expired' });
    }
    if (base.nbf > now + this.skew()) {
      throw new SvcError('remit_invalid', `remit ${remitId} is not valid before ${isoTime(base.nbf * 1000)}`, { remit_id: remitId, reason: 'remit_not_yet_valid' });
    }
    const payload = orderedPayload({ ...base, run: runId, iss: this.k.keys.keyId });
    const payloadText = canonicalJson(payload); // the token's bytes, the binding's and the run's copy
    const token = encodeCanonicalToken(payload, payloadText, this.k.keys);
    const res = await db.run('INSERT INTO remit_bindings (remit_id, run_id, bound_payload, bound_token, bound_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (remit_id) DO NOTHING', [
      remitId,
      runId,
      payloadText,
      token,
      isoTime(this.k.clock.now()),
    ]);
    if (res.changes !== 1) throw new SvcError('remit_bound', `remit ${remitId} is already bound to a run (a remit serves one run: mint or derive another for this one)`, { remit_id: remitId });
    return { token, payload, payloadText };
  }

  /** Interface 5.3 steps 1–7 against the kernel's keys, clock and configured skew. */
  verify(token: string, call: RemitCallCheck = {}): VerifyResult {
    return verifyRemit(token, this.k.keys, this.now(), call, { skewSeconds: this.skew() });
  }
}

/**
 * The child's validity window (interface 5.4: `exp` earlier, `nbf` later). `ttl_seconds` and
 * `exp` may both be given: each must end by the parent's expiry, and the earlier wins. `nbf`
 * is never before now (nor the parent's); a window that ends before it starts, or that has
 * already ended, is a request error, not a widening.
 */
function narrowedTimes(req: DeriveRequest, parent: RemitPayload, now: number): { exp: number; nbf: number } {
  let exp = parent.exp;
  if (req.ttl_seconds !== undefined) {
    const byTtl = now + req.ttl_seconds;
    if (byTtl > parent.exp) {
      throw widens('exp', `ttl_seconds ${req.ttl_seconds} would end at ${isoTime(byTtl * 1000)}, after the parent's expiry ${isoTime(parent.exp * 1000)}`, { value: byTtl, parent: parent.exp });
    }
    exp = byTtl;
  }
  if (req.exp !== undefined) {
    if (req.exp > parent.exp) {
      throw widens('exp', `exp ${isoTime(req.exp * 1000)} is after the parent's expiry ${isoTime(parent.exp * 1000)}`, { value: req.exp, parent: parent.exp });
    }
    if (req.exp <= now) throw new SvcError('request_invalid', `exp ${isoTime(req.exp * 1000)} has already passed`, { path: '/exp' });
    exp = Math.min(exp, req.exp);
  }
  if (req.nbf !== undefined && req.nbf < parent.nbf) {
    throw widens('nbf', `nbf ${isoTime(req.nbf * 1000)} is before the parent's ${isoTime(parent.nbf * 1000)}`, { value: req.nbf, parent: parent.nbf });
  }
  const nbf = Math.max(now, parent.nbf, req.nbf ?? 0);
  if (nbf >= exp) {
    throw new SvcError('request_invalid', `nbf ${isoTime(nbf * 1000)} is not before exp ${isoTime(exp * 1000)}: the remit would never be valid`, { path: req.nbf !== undefined ? '/nbf' : '/exp' });
  }
  return { exp, nbf };
}

/**
 * A child's spend (decisions §3, 8.3): each member given must be within the parent's spend and
 * within what is left of it (less other children's reservations and the parent run's usage);
 * a member not given is inherited as what is left. Integer micro-dollars throughout.
 */
function narrowedSpend(asked: Partial<Spend> | undefined, parentSpend: Spend, row: Pick<RemitRow, 'spend_tokens' | 'reserved_tokens' | 'spend_usd_micro' | 'reserved_usd_micro'>, used: Spend): Spend {
  const left = {
    tokens: row.spend_tokens - row.reserved_tokens - used.tokens,
    // The run's usage is summed to the nano-dollar (src/spend.ts): counted here in whole
    // micro-dollars rounded up, never down, so the parent run keeps at least what it has used
    // (rounded down, an inherited remainder left it under its own usage and it failed
    // budget_exhausted at its next step).
    usdMicro: row.spend_usd_micro - row.reserved_usd_micro - usdMicroUp(used.usd),
  };
  const spend: Spend = {
    tokens: asked?.tokens ?? Math.max(0, left.tokens),
    usd: asked?.usd ?? Math.max(0, left.usdMicro) / 1_000_000,
  };
  if (!asked) return spend;
  // Only the members given are checked: an inherited one is what is left, by definition.
  const tokensOver = (limit: number) => asked.tokens !== undefined && asked.tokens > limit;
  const usdOver = (limitMicro: number) => asked.usd !== undefined && usdMicro(asked.usd) > limitMicro;
  // The message names the members over and the numbers they are over, as asked for: the
  // other member (inherited, or within) would only distract.
  const over = (limits: Spend, tokensLimit: number, usdLimitMicro: number) =>
    [
      tokensOver(tokensLimit) ? `spend.tokens ${asked.tokens} exceeds ${limits.tokens}` : null,
      usdOver(usdLimitMicro) ? `spend.usd ${asked.usd} exceeds ${limits.usd}` : null,
    ]
      .filter(Boolean)
      .join(' and ');
  if (tokensOver(parentSpend.tokens) || usdOver(row.spend_usd_micro)) {
    throw widens('spend', `${over(parentSpend, parentSpend.tokens, row.spend_usd_micro)}, the parent's spend`, { requested: asked, parent: parentSpend });
  }
  // Past zero (a run that overran its limit before it failed) nothing is left, and a child
  // asking for nothing takes nothing: it is allowed, as an inherited zero is.
  if (tokensOver(Math.max(0, left.tokens)) || usdOver(Math.max(0, left.usdMicro))) {
    const available = { tokens: Math.max(0, left.tokens), usd: Math.max(0, left.usdMicro) / 1_000_000 };
    throw widens('spend', `${over(available, available.tokens, Math.max(0, left.usdMicro))}, what the parent has left (not spent by its run, not reserved for other children)`, { requested: asked, available, used });
  }
  return spend;
}

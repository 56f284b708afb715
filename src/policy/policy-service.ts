/**
 * Policies as a kernel service (interface 2.3, 4.1; decisions 5): post immutable versions,
 * read them, pin a remit's policy_set to versions at run creation, decide proposals under the
 * pinned versions, and compare two policies over a corpus (5.3). Each version is compiled once
 * and cached: decide is on the path of every proposal.
 */
import type { Clock } from '../clock.js';
import { isoTime } from '../clock.js';
import { SvcError, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { SqlDb } from '../store/sql-db.js';
import type { DecisionResult, PolicyAction, PolicyRef, PolicyRunContext, StoredPolicy } from '../types.js';
import { compilePolicy, type CompiledPolicy } from './compile.js';
import { comparePoliciesInSlices, normalizeCorpus, type ApproverChange, type Flip } from './corpus.js';
import { decide } from './decide.js';
import { checkPolicyPost, checkPolicyTest } from './requests.js';


/** Compiled versions kept in memory. Versions are immutable, so entries never go stale. */
const CACHE_LIMIT = 1000;

/**
 * Policy tests evaluated at once; more wait their turn, in order. Each test
 * pauses every few ms for the event loop (src/policy/corpus.ts), but every running test adds
 * a slice to each turn of the loop: two keep the other requests' wait near 20 ms on the
 * kernel's two cores, where twenty would make it 200 ms.
 */
export const MAX_RUNNING_POLICY_TESTS = 2;

export interface PolicyPostBody {
  name: string;
  version: string;
  source: string;
}

export interface PolicyPostResult {
  /** 201 when created, 200 when the same version with the same source already existed. */
  status: 200 | 201;
  policy_id: string;
  name: string;
  version: string;
}

/** One entry of GET /v1/policies (the source is left out). */
export interface PolicySummary {
  policy_id: string;
  name: string;
  version: string;
  created_at: string;
}

/** Body of POST /v1/policies/test (decisions 5.3). */
export interface PolicyTestBody {
  policy_a: { name: string; version?: string };
  /** A stored policy, or a source under test (its rules are named `<name>/<rule>`, name defaulting to policy_a's). */
  policy_b: { name: string; version?: string } | { source: string; name?: string };
  corpus: unknown[];
  /**
   * svc's extension: each flip also carries the conditions that failed while its case was
   * decided (`errors_a`, `errors_b`). Asked for, so a flip keeps the contract's five members.
   */
  explain?: boolean;
}

export interface PolicyTestResult {
  cases: number;
  flips: Flip[];
  /** With `explain`: cases approval_required under both whose approver differs. */
  approver_changes?: ApproverChange[];
  /** The versions compared, resolved (a missing version means the latest). */
  policy_a: PolicyRef;
  policy_b: PolicyRef | { name: string; source: true };
}

interface PolicyRow {
  policy_id: string;
  name: string;
  version: string;
  source: string;
  created_at: string;
}

/** Options of PolicyService.test. */
export interface PolicyTestOptions {
  /**
   * Stops the test (the client went away, the kernel is shutting down): it rejects with the
   * signal's reason, an SvcError, or 503 `unavailable` for any other reason.
   */
  signal?: AbortSignal;
}

/** At most `limit` holders at once; the others wait in order and leave the queue when aborted. */
class Slots {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  /** Slots held now. */
  get active(): number {
    return this.held;
  }

  /** Resolves with the function that gives the slot back. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.held < this.limit) this.held++;
    else {
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          const i = this.waiting.indexOf(turn);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(signal!.reason);
        };
        const turn = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        this.waiting.push(turn);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    }
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.waiting.shift();
      if (next) next(); // the slot passes on: `held` stays
      else this.held--;
    };
  }
}

function rowToPolicy(r: PolicyRow): StoredPolicy {
  return { policy_id: r.policy_id, name: r.name, version: r.version, source: r.source, created_at: r.created_at };
}

/** Splits a policy_set entry `name` or `name@version`. */
export function parsePolicyEntry(entry: string): { name: string; version: string | null } {
  const at = entry.indexOf('@');
  return at < 0 ? { name: entry, version: null } : { name: entry.slice(0, at), version: entry.slice(at + 1) };
}

export class PolicyService {
  private readonly cache = new Map<string, CompiledPolicy>();
  private readonly testSlots = new Slots(MAX_RUNNING_POLICY_TESTS);

  constructor(private readonly deps: { db: SqlDb; clock: Clock }) {}

  /** POST /v1/policies: checks the body (request_invalid), compiles (policy_invalid), then stores an immutable version. */
  async post(input: unknown): Promise<PolicyPostResult> {
    const body = checkPolicyPost(input);
    const ref = { name: body.name, version: body.version };
    const { db, clock } = this.deps;
    // The same source posted again is the version already there (200), even when it was
    // accepted before a check that would refuse it now (stored versions stay as accepted).
    const same = await db.get<PolicyRow>('SELECT * FROM policies WHERE name = ? AND version = ?', [ref.name, ref.version]);
    if (same && same.source === body.source) return { status: 200, policy_id: same.policy_id, name: ref.name, version: ref.version };
    const compiled = compilePolicy(ref, body.source);
    const result = await db.tx(async (t) => {
      const existing = await t.get<PolicyRow>('SELECT * FROM policies WHERE name = ? AND version = ?', [ref.name, ref.version]);
      if (existing) return { existing };
      const policyId = newId('policy', clock.now());
      const inserted = await t.run('INSERT INTO policies (policy_id, name, version, source, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (name, version) DO NOTHING', [
        policyId,
        ref.name,
        ref.version,
        body.source,
        isoTime(clock.now()),
      ]);
      const row = await t.get<PolicyRow>('SELECT * FROM policies WHERE name = ? AND version = ?', [ref.name, ref.version]);
      return inserted.changes === 1 ? { created: row! } : { existing: row! };
    });
    if ('created' in result && result.created) {
      this.remember(compiled);
      return { status: 201, policy_id: result.created.policy_id, name: ref.name, version: ref.version };
    }
    const existing = result.existing!;
    if (existing.source !== body.source) {
      throw new SvcError('policy_version_exists', `policy ${ref.name}@${ref.version} exists with a different source; versions are immutable, post a new version`, {
        name: ref.name,
        version: ref.version,
        policy_id: existing.policy_id,
      });
    }
    return { status: 200, policy_id: existing.policy_id, name: ref.name, version: ref.version };
  }

  /** GET /v1/policies: every version, by name, oldest version first. */
  async list(): Promise<{ policies: PolicySummary[] }> {
    const rows = await this.deps.db.all<PolicySummary>('SELECT policy_id, name, version, created_at FROM policies ORDER BY name, policy_id');
    return { policies: rows.map((r) => ({ policy_id: r.policy_id, name: r.name, version: r.version, created_at: r.created_at })) };
  }

  /** GET /v1/policies/{name}: the latest (most recently posted) version. */
  async getLatest(name: string): Promise<StoredPolicy> {
    const row = await this.deps.db.get<PolicyRow>('SELECT * FROM policies WHERE name = ? ORDER BY policy_id DESC LIMIT 1', [name]);
    if (!row) throw notFound('policy', name);
    return rowToPolicy(row);
  }

  /** GET /v1/policies/{name}/{version}. */
  async get(name: string, version: string): Promise<StoredPolicy> {
    const row = await this.deps.db.get<PolicyRow>('SELECT * FROM policies WHERE name = ? AND version = ?', [name, version]);
    if (!row) throw notFound('policy', `${name}@${version}`);
    return rowToPolicy(row);
  }

  /**
   * Pins a remit's policy_set (decisions 5.2): each entry `name` (its latest version now) or
   * `name@version`, in order, duplicates dropped. An unknown one is 422 `policy_not_found`.
   */
  async pin(policySet: readonly string[]): Promise<PolicyRef[]> {
    const out: PolicyRef[] = [];
    const seen = new Set<string>();
    for (const entry of policySet) {
      const { name, version } = parsePolicyEntry(entry);
      const row = version === null
        ? await this.deps.db.get<PolicyRow>('SELECT name, version FROM policies WHERE name = ? ORDER BY policy_id DESC LIMIT 1', [name])
        : await this.deps.db.get<PolicyRow>('SELECT name, version FROM policies WHERE name = ? AND version = ?', [name, version]);
      if (!row) throw new SvcError('policy_not_found', `policy ${entry} named by the policy_set does not exist`, { policy: entry });
      const key = `${row.name}@${row.version}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ name: row.name, version: row.version });
    }
    return out;
  }

  /** The compiled form of a stored version (cached). Unknown: 422 `policy_not_found`. */
  async compiled(ref: PolicyRef): Promise<CompiledPolicy> {
    const key = `${ref.name}@${ref.version}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const row = await this.deps.db.get<PolicyRow>('SELECT * FROM policies WHERE name = ? AND version = ?', [ref.name, ref.version]);
    if (!row) throw new SvcError('policy_not_found', `policy ${key} does not exist`, { policy: key });
    return this.remember(compilePolicy(ref, row.source, { stored: true }));
  }

  /** Decides a proposal under pinned versions, in policy_set order (decisions 5.2). */
  async decide(refs: readonly PolicyRef[], action: PolicyAction, run: PolicyRunContext): Promise<DecisionResult> {
    const policies: CompiledPolicy[] = [];
    for (const ref of refs) policies.push(await this.compiled(ref));
    return decide(policies, action, run);
  }

  /**
   * POST /v1/policies/test (decisions 5.3): every case under A alone and B alone; the flips.
   * At most MAX_RUNNING_POLICY_TESTS run at once, each in slices that let other requests in.
   */
  async test(input: unknown, opts: PolicyTestOptions = {}): Promise<PolicyTestResult> {
    const { signal } = opts;
    const body: PolicyTestBody = checkPolicyTest(input);
    let release: (() => void) | null = null;
    try {
      release = await this.testSlots.acquire(signal);
      const a = await this.resolve(body.policy_a, '/policy_a');
      const cases = normalizeCorpus(body.corpus);
      let b: CompiledPolicy;
      let bRef: PolicyTestResult['policy_b'];
      if (body.policy_b && 'source' in body.policy_b && typeof body.policy_b.source === 'string') {
        const name = body.policy_b.name ?? a.ref.name;
        b = compilePolicy({ name, version: 'source' }, body.policy_b.source);
        bRef = { name, source: true };
      } else {
        b = await this.resolve(body.policy_b as { name: string; version?: string }, '/policy_b');
        bRef = b.ref;
      }
      signal?.throwIfAborted();
      return { ...(await comparePoliciesInSlices(a, b, cases, { signal, explain: body.explain === true })), policy_a: a.ref, policy_b: bRef };
    } catch (err) {
      if (signal?.aborted && err === signal.reason && !(err instanceof SvcError)) {
        throw new SvcError('unavailable', 'the policy test was stopped before it finished', {});
      }
      throw err;
    } finally {
      release?.();
    }
  }

  /** Policy tests running now (waiting ones not counted). */
  get runningTests(): number {
    return this.testSlots.active;
  }

  private async resolve(spec: { name: string; version?: string } | undefined, path: string): Promise<CompiledPolicy> {
    if (!spec || typeof spec.name !== 'string') throw new SvcError('request_invalid', `${path}/name is required`, { path: `${path}/name` });
    const stored = spec.version === undefined ? await this.getLatest(spec.name) : await this.get(spec.name, spec.version);
    return this.compiled({ name: stored.name, version: stored.version });
  }

  private remember(policy: CompiledPolicy): CompiledPolicy {
    const key = `${policy.ref.name}@${policy.ref.version}`;
    if (this.cache.size >= CACHE_LIMIT && !this.cache.has(key)) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(key, policy);
    return policy;
  }
}

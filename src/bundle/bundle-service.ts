/**
 * Bundles as a kernel service (interface 2.2, 4.1 rule 1; decisions 4). A post is checked in
 * this order: the signature against the trusted publishers (nothing about an untrusted
 * bundle's content is reported), then validation (every problem), then the version rule:
 * identical content under the same name and version is a 200 with the same id, other content
 * is 409 `bundle_version_exists`.
 */
import type { Clock } from '../clock.js';
import { isoTime } from '../clock.js';
import { SvcError, notFound } from '../errors.js';
import { deepFreeze } from '../util/deep-freeze.js';
import type { SqlDb } from '../store/sql-db.js';
import type { Bundle, StoredBundle, TrustedKeys } from '../types.js';
import { bundleId, verifyBundleSignature } from './sign.js';
import { validateBundle } from './validate.js';

export interface BundlePostResult {
  /** 201 when stored now, 200 when the identical bundle was already stored. */
  status: 200 | 201;
  bundle_id: string;
  name: string;
  version: string;
}

/** One entry of GET /v1/bundles. */
export interface BundleSummary {
  bundle_id: string;
  name: string;
  version: string;
  description: string | null;
  workflows: string[];
  key_id: string;
  created_at: string;
}

interface BundleRow {
  bundle_id: string;
  name: string;
  version: string;
  body: string;
  key_id: string;
  signature: string;
  created_at: string;
}

export interface BundleServiceDeps {
  db: SqlDb;
  clock: Clock;
  /** The publisher keys trusted for bundle signatures (read on every post). */
  publishers: () => TrustedKeys;
}

export class BundleService {
  /** Parsed bundles by id: they are immutable, and the run engine reads them on every lease. */
  private readonly cache = new Map<string, StoredBundle>();
  /** Bundles whose signature verified, with the publisher key it verified under. */
  private readonly verifiedUnder = new Map<string, Uint8Array>();
  /** The body-derived members of each bundle's list entry, by id: a few names per bundle. */
  private readonly summaries = new Map<string, { description: string | null; workflows: string[] }>();

  constructor(private readonly deps: BundleServiceDeps) {}

  /** POST /v1/bundles. */
  async post(body: { bundle?: unknown; signature?: unknown }): Promise<BundlePostResult> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new SvcError('request_invalid', 'body must be {bundle, signature}', { path: '' });
    const value = body.bundle;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new SvcError('request_invalid', '/bundle must be an object', { path: '/bundle' });
    }
    verifyBundleSignature(value, body.signature, this.deps.publishers());
    const checked = validateBundle(value);
    if (!checked.ok) {
      const first = checked.problems[0]!;
      const more = checked.problems.length > 1 ? ` (and ${checked.problems.length - 1} more)` : '';
      throw new SvcError('bundle_invalid', `${first.path || '/'}: ${first.message}${more}`, { path: first.path, problems: checked.problems });
    }
    const bundle = checked.bundle;
    const id = bundleId(bundle);
    const sig = body.signature as { key_id: string; signature: string };
    const now = isoTime(this.deps.clock.now());
    const outcome = await this.deps.db.tx(async (t) => {
      const existing = await t.get<BundleRow>('SELECT bundle_id FROM bundles WHERE name = ? AND version = ?', [bundle.name, bundle.version]);
      if (existing) return { existingId: existing.bundle_id };
      const inserted = await t.run(
        'INSERT INTO bundles (bundle_id, name, version, body, key_id, signature, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
        [id, bundle.name, bundle.version, JSON.stringify(bundle), sig.key_id, sig.signature, now],
      );
      if (inserted.changes === 1) return { created: true as const };
      // Another writer (another svcd on a shared store) got there first.
      const row = await t.get<BundleRow>('SELECT bundle_id FROM bundles WHERE name = ? AND version = ?', [bundle.name, bundle.version]);
      return { existingId: row!.bundle_id };
    });
    if ('created' in outcome) {
      this.summaries.set(id, { description: bundle.description ?? null, workflows: Object.keys(bundle.workflows ?? {}) });
      return { status: 201, bundle_id: id, name: bundle.name, version: bundle.version };
    }
    if (outcome.existingId !== id) {
      throw new SvcError('bundle_version_exists', `bundle ${bundle.name}@${bundle.version} exists with different content; post a new version`, {
        name: bundle.name,
        version: bundle.version,
        bundle_id: outcome.existingId,
      });
    }
    await this.resignIfUntrusted(id, sig);
    return { status: 200, bundle_id: id, name: bundle.name, version: bundle.version };
  }

  /**
   * An identical re-post keeps the first signature, unless that one no longer verifies under a
   * key trusted now (its publisher dropped, say): then the re-post's, which just verified, takes
   * its place, so re-signing a bundle under a trusted key lets it start runs again instead of
   * a 200 that changed nothing.
   */
  private async resignIfUntrusted(id: string, sig: { key_id: string; signature: string }): Promise<void> {
    const stored = await this.get(id);
    try {
      verifyBundleSignature(stored.bundle, stored.signature, this.deps.publishers());
      return;
    } catch {
      // replaced below
    }
    await this.deps.db.tx((t) => t.run('UPDATE bundles SET key_id = ?, signature = ? WHERE bundle_id = ?', [sig.key_id, sig.signature, id]));
    this.cache.delete(id);
    this.verifiedUnder.delete(id);
  }

  /**
   * GET /v1/bundles: every bundle, by name then posting order. The summary's two body-derived
   * members are kept per bundle id (bundles are immutable), so the list reads no body but the
   * first time a process lists a bundle: each body is up to 8 MiB (decisions §10), and reading
   * and parsing all of them on every list held the event loop for seconds (100 bundles of
   * 7 MB: 3 s and 2.4 GB, for an 18 KB answer).
   */
  async list(): Promise<{ bundles: BundleSummary[] }> {
    const rows = await this.deps.db.all<Omit<BundleRow, 'body' | 'signature'>>('SELECT bundle_id, name, version, key_id, created_at FROM bundles ORDER BY name, created_at, bundle_id');
    const bundles: BundleSummary[] = [];
    for (const r of rows) {
      let s = this.summaries.get(r.bundle_id);
      if (!s) {
        const body = await this.deps.db.get<{ body: string }>('SELECT body FROM bundles WHERE bundle_id = ?', [r.bundle_id]);
        const b = JSON.parse(body!.body) as Bundle;
        s = { description: b.description ?? null, workflows: Object.keys(b.workflows ?? {}) };
        this.summaries.set(r.bundle_id, s);
      }
      bundles.push({ bundle_id: r.bundle_id, name: r.name, version: r.version, description: s.description, workflows: [...s.workflows], key_id: r.key_id, created_at: r.created_at });
    }
    return { bundles };
  }

  /**
   * A bundle to start a run of: its signature must still verify under a publisher key the
   * kernel trusts now, not only when it was posted (interface 9: "Bundles are trusted by
   * signature from publisher keys"), so dropping a compromised publisher from the config stops
   * its bundles at the next start. Runs already going are not stopped. 422
   * bundle_signature_invalid otherwise. The verification is remembered per key: one Ed25519
   * verify per bundle and process, not one per run.
   */
  async getTrusted(id: string): Promise<StoredBundle> {
    const stored = await this.get(id);
    const key = this.deps.publishers().lookup(stored.signature.key_id);
    const verified = this.verifiedUnder.get(id);
    if (key !== null && verified !== undefined && Buffer.compare(Buffer.from(key), Buffer.from(verified)) === 0) return stored;
    try {
      verifyBundleSignature(stored.bundle, stored.signature, this.deps.publishers());
    } catch {
      const k = stored.signature.key_id;
      // Untrusted: trusting the key again is a way back. Trusted under another public key (the
      // id reused for a new pair): only a new signature is.
      const why = key === null ? `key ${k} is no longer a trusted publisher key` : `its signature no longer verifies under key ${k} (the key trusted under that id is another one)`;
      const orTrust = key === null ? `, or trust key ${k} again (svcd --publisher)` : '';
      throw new SvcError('bundle_signature_invalid', `bundle ${stored.name}@${stored.version} cannot start runs: ${why}; push it again signed with a trusted key (svc bundle push FILE --key KEYFILE: the new signature replaces this one)${orTrust}`, { bundle_id: id, key_id: k });
    }
    if (this.verifiedUnder.size >= 1024) this.verifiedUnder.delete(this.verifiedUnder.keys().next().value!);
    this.verifiedUnder.set(id, key!);
    return stored;
  }

  /**
   * GET /v1/bundles/{id}: 404 `not_found` (resource "bundle") when unknown. The result is
   * shared and deeply frozen: bundles are immutable, copy before changing anything.
   */
  async get(id: string): Promise<StoredBundle> {
    const hit = this.cache.get(id);
    if (hit) return hit;
    const r = await this.deps.db.get<BundleRow>('SELECT * FROM bundles WHERE bundle_id = ?', [id]);
    if (!r) throw notFound('bundle', id);
    const stored: StoredBundle = {
      bundle_id: r.bundle_id,
      name: r.name,
      version: r.version,
      bundle: JSON.parse(r.body) as Bundle,
      signature: { key_id: r.key_id, signature: r.signature },
      created_at: r.created_at,
    };
    deepFreeze(stored);
    if (this.cache.size >= 256) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(id, stored);
    return stored;
  }
}

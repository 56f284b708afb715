/**
 * The remits table (interface 2.1, decisions §3, 8.3). One row per remit: the unbound payload
 * and token as issued and the spend its children have reserved; `remit_bindings` holds the
 * run a remit is bound to with the run-bound payload and token. usd amounts are kept as integer micro-dollars so reservations add
 * up exactly.
 */
import type { Migration, SqlDb } from '../store/sql-db.js';

export const REMIT_MIGRATIONS: Migration[] = [
  {
    id: 'remits-001-create',
    sql: `
      CREATE TABLE remits (
        remit_id        TEXT PRIMARY KEY,
        parent_id       TEXT REFERENCES remits (remit_id),
        run_id          TEXT,
        payload         TEXT NOT NULL,
        token           TEXT NOT NULL,
        bound_payload   TEXT,
        bound_token     TEXT,
        spend_tokens    INTEGER NOT NULL,
        spend_usd_micro INTEGER NOT NULL,
        reserved_tokens INTEGER NOT NULL DEFAULT 0,
        reserved_usd_micro INTEGER NOT NULL DEFAULT 0,
        exp             INTEGER NOT NULL,
        created_at      TEXT NOT NULL,
        bound_at        TEXT
      );
      CREATE INDEX remits_parent ON remits (parent_id);
      CREATE INDEX remits_run ON remits (run_id);
    `,
  },
  {
    // Most remits have no parent, and none has a run when minted: indexing only the rows that
    // do spares every mint two index pages in the WAL (bench/README.md).
    id: 'remits-002-partial-indexes',
    sql: `
      DROP INDEX remits_parent;
      CREATE INDEX remits_parent ON remits (parent_id) WHERE parent_id IS NOT NULL;
      DROP INDEX remits_run;
      CREATE INDEX remits_run ON remits (run_id) WHERE run_id IS NOT NULL;
    `,
  },
  {
    // A binding is a fact of its own. Written into the remit's row it grew that row by the
    // run-bound payload and token (≈930 bytes), which no longer fit its page: every run's
    // creation rebalanced five remits pages (bench/README.md). remits.run_id, bound_payload,
    // bound_token and bound_at are no longer written; bindings made before are copied here.
    id: 'remits-003-bindings',
    sql: `
      CREATE TABLE remit_bindings (
        remit_id      TEXT PRIMARY KEY REFERENCES remits (remit_id),
        run_id        TEXT NOT NULL,
        bound_payload TEXT NOT NULL,
        bound_token   TEXT NOT NULL,
        bound_at      TEXT NOT NULL
      );
      INSERT INTO remit_bindings (remit_id, run_id, bound_payload, bound_token, bound_at)
        SELECT remit_id, run_id, bound_payload, bound_token, COALESCE(bound_at, created_at)
        FROM remits WHERE run_id IS NOT NULL AND bound_payload IS NOT NULL AND bound_token IS NOT NULL;
    `,
  },
  {
    // remits.run_id is no longer written (remits-003): its index would only hold old rows.
    id: 'remits-004-drop-run-index',
    sql: `DROP INDEX remits_run;`,
  },
  {
    // The rows an svcd from before remits-003 bound in remits itself, for adoptLegacyBindings:
    // this build never sets remits.run_id, so only such rows enter the index.
    id: 'remits-005-legacy-binding-index',
    sql: `CREATE INDEX remits_legacy_binding ON remits (remit_id) WHERE run_id IS NOT NULL;`,
  },
];

/**
 * Copies into remit_bindings the bindings an svcd from before remits-003 (2026-11-23) wrote
 * into remits' own columns after this store was migrated past it: such a build ignores
 * migrations it does not know and opens the store anyway, and without this a remit it bound
 * would look unbound here and could be bound to a second run. Run at every kernel start;
 * idempotent, and reads only the legacy rows (remits-005's index). Builds since
 * SchemaTooNewError refuse a store migrated past them instead.
 */
export async function adoptLegacyBindings(db: SqlDb): Promise<number> {
  const res = await db.tx((t) =>
    t.run(
      `INSERT INTO remit_bindings (remit_id, run_id, bound_payload, bound_token, bound_at)
       SELECT r.remit_id, r.run_id, r.bound_payload, r.bound_token, COALESCE(r.bound_at, r.created_at)
       FROM remits r
       WHERE r.run_id IS NOT NULL AND r.bound_payload IS NOT NULL AND r.bound_token IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM remit_bindings b WHERE b.remit_id = r.remit_id)`,
    ),
  );
  return res.changes;
}

/**
 * Remits an svcd from before remits-003 bound to a run other than the one remit_bindings
 * names: it took a remit this build had bound for unbound and started a second run under it.
 * Nothing undoes that; an operator has to hear of it (remits-005's index: only legacy rows).
 */
export function legacyBindingConflicts(db: SqlDb): Promise<Array<{ remit_id: string; run_id: string; legacy_run_id: string }>> {
  return db.all(
    `SELECT r.remit_id, b.run_id, r.run_id AS legacy_run_id FROM remits r JOIN remit_bindings b ON b.remit_id = r.remit_id
     WHERE r.run_id IS NOT NULL AND r.run_id <> b.run_id ORDER BY r.remit_id LIMIT 100`,
  );
}

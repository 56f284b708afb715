/**
 * The remits table (interface 2.1, decisions §3, 8.3). One row per remit: the unbound payload
 * and token as issued, the run it is bound to with the run-bound token, and the spend its
 * children have reserved. usd amounts are kept as integer micro-dollars so reservations add
 * up exactly.
 */
import type { Migration } from '../store/sql-db.js';

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
];

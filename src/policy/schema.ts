/**
 * Policy tables (decisions 5). A (name, version) pair is immutable; `policy_id` is a ULID so
 * ordering by it orders by posting time, which is what "latest" means.
 */
import type { Migration } from '../store/sql-db.js';

export const POLICY_MIGRATIONS: Migration[] = [
  {
    id: 'policies-001-create',
    sql: `
CREATE TABLE policies (
  policy_id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  version TEXT NOT NULL,
  source TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (name, version)
);
CREATE INDEX policies_by_name ON policies (name, policy_id);
`,
  },
];

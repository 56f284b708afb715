/**
 * Bundle tables (decisions 4). `bundle_id` is the content address (sha256 of JCS(bundle)), so
 * one row per distinct content; (name, version) is unique, which is the 409 rule.
 */
import type { Migration } from '../store/sql-db.js';

export const BUNDLE_MIGRATIONS: Migration[] = [
  {
    id: 'bundles-001-create',
    sql: `
CREATE TABLE bundles (
  bundle_id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  version TEXT NOT NULL,
  body TEXT NOT NULL,
  key_id TEXT NOT NULL,
  signature TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (name, version)
);
`,
  },
];

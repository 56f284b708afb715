/**
 * Tables of the run engine. Portable SQL (SQLite and PostgreSQL): JSON in TEXT, ISO times in
 * TEXT, epoch milliseconds in BIGINT where the engine sorts or compares times (read back through
 * Number(): PostgreSQL returns BIGINT as a string).
 */
import type { Migration } from '../store/sql-db.js';

export const RUN_MIGRATIONS: Migration[] = [
  {
    id: 'runs-001-runs-events-leases-approvals',
    sql: `
CREATE TABLE runs (
  run_id TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  department TEXT NOT NULL,
  bundle_id TEXT NOT NULL,
  workflow TEXT NOT NULL,
  remit_id TEXT NOT NULL,
  parent_run_id TEXT,
  remit_token TEXT NOT NULL,
  remit_payload TEXT NOT NULL,
  model TEXT NOT NULL,
  last_seq INTEGER NOT NULL,
  head_hash TEXT NOT NULL,
  head_signature TEXT NOT NULL,
  head_key_id TEXT NOT NULL,
  work_kind TEXT,
  work_step TEXT,
  work_ready_at BIGINT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX runs_work ON runs (work_kind, work_ready_at);
CREATE INDEX runs_state ON runs (state, run_id);
CREATE INDEX runs_department ON runs (department, run_id);
CREATE INDEX runs_parent ON runs (parent_run_id);

CREATE TABLE run_events (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  hash TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  kind TEXT NOT NULL,
  payload TEXT NOT NULL,
  actor TEXT NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
);

CREATE TABLE leases (
  lease_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  step TEXT NOT NULL,
  kind TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  worker_id TEXT NOT NULL,
  status TEXT NOT NULL,
  ttl_seconds INTEGER NOT NULL,
  expires_at BIGINT NOT NULL,
  leased_at BIGINT NOT NULL,
  ended_at TEXT
);
CREATE INDEX leases_active ON leases (status, expires_at);
CREATE INDEX leases_run ON leases (run_id, status);

CREATE TABLE approvals (
  approval_id TEXT PRIMARY KEY,
  run_id TEXT NOT NULL,
  step TEXT NOT NULL,
  action_id TEXT NOT NULL,
  action TEXT NOT NULL,
  rule TEXT NOT NULL,
  approver TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at TEXT NOT NULL,
  decided_at TEXT,
  decision TEXT,
  actor TEXT,
  reason TEXT
);
CREATE UNIQUE INDEX approvals_run_action ON approvals (run_id, action_id);
CREATE INDEX approvals_state ON approvals (state, approval_id);
CREATE INDEX approvals_approver ON approvals (approver, state, approval_id);
`,
  },
  {
    // Each write to an indexed row writes the index's page too. Top-level runs have no parent,
    // and finished leases are never looked up by these two indexes (the sweeper and abandon
    // ask for active leases only): indexing only the rows the queries ask for spares a run's
    // creation, a lease's completion and its expiry a page each (bench/README.md).
    id: 'runs-002-partial-indexes',
    sql: `
DROP INDEX runs_parent;
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
DROP INDEX leases_active;
CREATE INDEX leases_active ON leases (expires_at) WHERE status = 'active';
DROP INDEX leases_run;
CREATE INDEX leases_run ON leases (run_id) WHERE status = 'active';
`,
  },
  {
    // The lease scan asks for runs with work of the worker's kinds, oldest first, ties by
    // run_id. With run_id in the index the scan reads the index alone, in that order, and stops
    // at its LIMIT; without it SQLite sorted every ready run of the kinds asked for (527 µs a
    // scan for two kinds and 5,000 ready runs, 5 µs now). Finished runs have no work: out of
    // the index (bench/README.md item 16).
    id: 'runs-003-work-index-covers-scan',
    sql: `
DROP INDEX runs_work;
CREATE INDEX runs_work ON runs (work_kind, work_ready_at, run_id) WHERE work_kind IS NOT NULL;
`,
  },
  {
    // A lease adds its row to both partial indexes of active leases and its completion takes
    // it out of both: leases_run cost each a WAL frame, two a cycle (≈16 µs). It served only
    // an abandon's look for the run's active lease, which now scans leases_active: it holds
    // only active leases (at most one per worker holding a lease), once per abandon
    // (bench/README.md item 19).
    id: 'runs-004-drop-leases-run-index',
    sql: `DROP INDEX leases_run;`,
  },
  {
    // Every run that ends (completion, failure, abandon) asks for its pending approvals
    // (cancelPendingApprovals). With only approvals_state to go by, SQLite read every pending
    // approval of the store to find the run's: 2.2 ms at 5,000 pending, on each run's end.
    // Indexing the pending ones by run makes it a look-up; decided rows leave the index.
    // GET /v1/approvals?approver=R (no state: `svc approvals list --state all`) sorted every
    // approval the approver ever had, per page; (approver, approval_id) reads one page's worth.
    id: 'runs-005-approval-indexes',
    sql: `
CREATE INDEX approvals_pending_run ON approvals (run_id, approval_id) WHERE state = 'pending';
CREATE INDEX approvals_approver_all ON approvals (approver, approval_id);
`,
  },
  {
    // The conditions that failed closed when the approval was asked for (decisions 5.1), as
    // JSON `[{rule, message}]`, or NULL: an approver must see that the policy could not read
    // the action, not only the rule that asked (docs/design.md "Approvals that failed closed").
    id: 'runs-006-approval-errors',
    sql: `ALTER TABLE approvals ADD COLUMN errors TEXT;`,
  },
];

/** The kernel metrics of interface 4.1 (and the store's, docs/design.md), one prom-client registry per kernel instance. */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { GroupCommitObserver } from '../store/sqlite-db.js';
import { registerDescriptorGauges } from './descriptors.js';

export class KernelMetrics {
  readonly registry = new Registry();
  readonly runs = new Gauge({ name: 'svc_runs', help: 'Runs by state', labelNames: ['state'], registers: [this.registry] });
  readonly stepsLeased = new Counter({ name: 'svc_steps_leased_total', help: 'Steps handed to workers', registers: [this.registry] });
  readonly stepLatency = new Histogram({
    name: 'svc_step_latency_seconds',
    help: 'Seconds from a step being leased to its completion',
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300],
    registers: [this.registry],
  });
  readonly usageUsd = new UsdCounter(this.registry);
  readonly approvalsPending = new Gauge({ name: 'svc_approvals_pending', help: 'Approvals waiting for a decision', registers: [this.registry] });
  readonly leasesExpired = new Counter({ name: 'svc_leases_expired_total', help: 'Leases that expired before completion', registers: [this.registry] });
  readonly events = new Counter({ name: 'svc_events_total', help: 'Run events appended, by kind', labelNames: ['kind'], registers: [this.registry] });
  // Beyond interface 4.1 (docs/design.md "Store"): what group commit costs a request.
  readonly storeSyncWait = new Histogram({
    name: 'svc_store_commit_sync_seconds',
    help: 'Seconds a durable store commit waited for the group-commit fsync that covered it (synchronous FULL or EXTRA)',
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
    registers: [this.registry],
  });
  readonly storeFsyncs = new Counter({ name: 'svc_store_fsyncs_total', help: 'Group-commit fsyncs of the store', registers: [this.registry] });
  readonly storeFsyncTransactions = new Counter({ name: 'svc_store_fsync_transactions_total', help: 'Transactions made durable by group-commit fsyncs', registers: [this.registry] });

  constructor() {
    registerDescriptorGauges(this.registry);
  }

  /** Hooks for the store's group commit (SqliteDbOptions.observer). */
  readonly groupCommit: GroupCommitObserver = {
    durableWait: (seconds) => this.storeSyncWait.observe(seconds),
    fsync: (transactions) => {
      this.storeFsyncs.inc();
      this.storeFsyncTransactions.inc(transactions);
    },
  };

  text(): Promise<string> {
    return this.registry.metrics();
  }
}

/**
 * svc_usage_usd_total{department}: dollars summed exactly, as a run's usage is (src/spend.ts),
 * not in binary floats, where 0.1 + 0.2 shows as 0.30000000000000004. Kept as whole
 * nano-dollars (the precision spend is rounded to) in a BigInt, and written into the counter
 * at each scrape.
 */
export class UsdCounter {
  private readonly nanos = new Map<string, bigint>();

  constructor(registry: Registry) {
    const nanos = this.nanos;
    new Counter({
      name: 'svc_usage_usd_total',
      help: 'Model and tool spend in USD',
      labelNames: ['department'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [department, n] of nanos) this.inc({ department }, Number(n) / 1e9);
      },
    });
  }

  /** Adds `usd` (≥ 0, finite) to `department`'s spend; 0 makes the series exist. */
  inc(labels: { department: string }, usd: number): void {
    const add = Number.isFinite(usd) && usd > 0 ? BigInt(Math.round(usd * 1e9)) : 0n;
    this.nanos.set(labels.department, (this.nanos.get(labels.department) ?? 0n) + add);
  }
}

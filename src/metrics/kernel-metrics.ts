/** The kernel metrics of interface 4.1, one prom-client registry per kernel instance. */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

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
  readonly usageUsd = new Counter({ name: 'svc_usage_usd_total', help: 'Model and tool spend in USD', labelNames: ['department'], registers: [this.registry] });
  readonly approvalsPending = new Gauge({ name: 'svc_approvals_pending', help: 'Approvals waiting for a decision', registers: [this.registry] });
  readonly leasesExpired = new Counter({ name: 'svc_leases_expired_total', help: 'Leases that expired before completion', registers: [this.registry] });
  readonly events = new Counter({ name: 'svc_events_total', help: 'Run events appended, by kind', labelNames: ['kind'], registers: [this.registry] });

  text(): Promise<string> {
    return this.registry.metrics();
  }
}

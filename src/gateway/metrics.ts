/** The gateway metrics of interface 4.2, one prom-client registry per gateway instance. */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerDescriptorGauges } from '../metrics/descriptors.js';

/** Interface 5.3 refusal reasons, in verification order. */
export const REFUSAL_REASONS = [
  'token_malformed',
  'signature_invalid',
  'remit_expired',
  'remit_not_yet_valid',
  'remit_run_mismatch',
  'tool_not_in_remit',
  'scope_not_granted',
  'autonomy_too_low',
] as const;

/** Why a gateway event did not reach its run (svc_gateway_events_dropped_total; src/gateway/event-outbox.ts). */
export const DROP_REASONS = ['refused', 'expired', 'full', 'store'] as const;

/** `svc_gateway_canary_status` values (interface 3). */
export const CANARY_STATUS_VALUE = { healthy: 1, failed: 0, quarantined: -1 } as const;

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly calls = new Counter({
    name: 'svc_gateway_calls_total',
    help: 'Tool calls by tool and outcome (ok, replayed, refused, circuit_open, store_failed, or the error code)',
    labelNames: ['tool', 'outcome'],
    registers: [this.registry],
  });
  readonly refusals = new Counter({ name: 'svc_gateway_refusals_total', help: 'Refused tool calls by interface 5.3 reason', labelNames: ['reason'], registers: [this.registry] });
  readonly latency = new Histogram({
    name: 'svc_gateway_call_latency_seconds',
    help: 'Seconds from receiving a tool call to answering it',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly canaryStatus = new Gauge({ name: 'svc_gateway_canary_status', help: 'Connector canary status: 1 healthy, 0 failed, -1 quarantined', labelNames: ['connector'], registers: [this.registry] });
  readonly circuitOpen = new Gauge({ name: 'svc_gateway_circuit_open', help: '1 while the connector circuit is open or half-open, else 0', labelNames: ['connector'], registers: [this.registry] });

  readonly outboxDepth = new Gauge({ name: 'svc_gateway_event_outbox_depth', help: 'Gateway events queued until the kernel answers again', registers: [this.registry] });
  readonly eventsDropped = new Counter({
    name: 'svc_gateway_events_dropped_total',
    help: 'Gateway events not recorded on their run: refused by the kernel, expired or dropped from a full outbox, or not stored',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  constructor() {
    // Every refusal reason exists from the start, so a rate over it is defined before the first refusal.
    for (const reason of REFUSAL_REASONS) this.refusals.inc({ reason }, 0);
    this.outboxDepth.set(0);
    for (const reason of DROP_REASONS) this.eventsDropped.inc({ reason }, 0);
    registerDescriptorGauges(this.registry);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}

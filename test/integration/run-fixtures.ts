/**
 * Shared set-up for the run engine's integration tests: a svcd on port 0 trusting a fresh
 * publisher key, signed bundles, policies, remits, runs and lease helpers over real HTTP.
 */
import { expect } from 'vitest';
import { signBundle } from '../../src/bundle/sign.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import type { Bundle } from '../../src/types.js';
import { startTestDaemon, type TestDaemon, type TestDaemonOptions } from '../helpers/daemon.js';

export type Publisher = ReturnType<typeof generatePublisherKey>;

export interface RunDaemon extends TestDaemon {
  publisher: Publisher;
}

export const REQUESTER = { id: 'ana', role: 'agent', manager: 'finance' } as const;
export const APPROVER = { id: 'fin-1', role: 'finance' } as const;

/** svcd in-process on port 0, trusting one new publisher key. */
export async function startRunDaemon(kernel: Record<string, unknown> = {}, token: string | null = null, extra: Omit<TestDaemonOptions, 'kernel' | 'token'> = {}): Promise<RunDaemon> {
  const publisher = generatePublisherKey();
  const d = await startTestDaemon({ ...extra, token, kernel: { publishers: [`${publisher.key_id}:${publisher.public_key}`], ...kernel } });
  return Object.assign(d, { publisher });
}

/** A three-step refunds bundle: model triage, tool lookup, action refund with a compensation. */
export function refundsBundle(overrides: Partial<Bundle> = {}): Bundle {
  return {
    name: 'refunds',
    version: '1.0.0',
    description: 'Handle refund tickets',
    department: 'support',
    systems_of_record: ['billing'],
    tools: { 'billing.lookup': { writes: false }, 'billing.refund': { writes: true }, 'billing.void_refund': { writes: true } },
    prompts: { triage: 'Classify this ticket: {{input.ticket}}' },
    mock: { triage: { output: { category: 'refund', amount: 50 } } },
    pacing: { model: { max_concurrent: 2, min_interval_ms: 0 } },
    workflows: {
      refund: {
        input_schema: { type: 'object', required: ['invoice_id'], properties: { invoice_id: { type: 'string' }, ticket: { type: 'string' } } },
        steps: [
          {
            id: 'triage',
            kind: 'model',
            prompt: 'triage',
            tools: ['billing.lookup'],
            output_schema: { type: 'object', required: ['amount'], properties: { amount: { type: 'number' } } },
            retry: { max_attempts: 3, initial_delay_ms: 200, max_delay_ms: 1000 },
          },
          { id: 'lookup', kind: 'tool', tool: 'billing.lookup', args: { invoice_id: '{{input.invoice_id}}' } },
          {
            id: 'refund',
            kind: 'action',
            tool: 'billing.refund',
            args: { invoice_id: '{{input.invoice_id}}', amount: '{{steps.triage.output.amount}}' },
            compensate: { tool: 'billing.void_refund', args: { refund_id: '{{steps.refund.output.id}}' } },
          },
        ],
      },
    },
    ...overrides,
  };
}

export async function pushBundle(d: RunDaemon, bundle: Bundle = refundsBundle()): Promise<string> {
  const res = await d.kernel_('/bundles', { body: { bundle, signature: signBundle(bundle, d.publisher) } });
  if (res.status !== 201 && res.status !== 200) throw new Error(`bundle push failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.bundle_id;
}

export async function pushPolicy(d: RunDaemon, name: string, version: string, source: string): Promise<void> {
  const res = await d.kernel_('/policies', { body: { name, version, source } });
  if (res.status !== 201 && res.status !== 200) throw new Error(`policy push failed: ${res.status} ${JSON.stringify(res.body)}`);
}

export interface MintOptions {
  spend?: { tokens: number; usd: number };
  autonomy?: string;
  policy_set?: string[];
  requested_by?: { id: string; role: string; manager: string };
  ttl_seconds?: number;
}

export async function mintRemit(d: RunDaemon, o: MintOptions = {}): Promise<{ remit_id: string; token: string }> {
  const res = await d.kernel_('/remits', {
    body: {
      tools: ['billing.*'],
      scopes: ['sql:table:*'],
      grants: [],
      spend: o.spend ?? { tokens: 100_000, usd: 5 },
      autonomy: o.autonomy ?? 'supervised',
      ttl_seconds: o.ttl_seconds ?? 3600,
      policy_set: o.policy_set ?? [],
      requested_by: o.requested_by ?? REQUESTER,
    },
  });
  if (res.status !== 201) throw new Error(`mint failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function startRun(
  d: RunDaemon,
  bundleId: string,
  o: MintOptions & { input?: unknown; workflow?: string } = {},
): Promise<{ run_id: string; remit_id: string; token: string }> {
  const remit = await mintRemit(d, o);
  const res = await d.kernel_('/runs', {
    body: { bundle_id: bundleId, workflow: o.workflow ?? 'refund', input: o.input ?? { invoice_id: 'inv-1', ticket: 'please refund' }, remit_id: remit.remit_id, requested_by: o.requested_by ?? REQUESTER },
  });
  if (res.status !== 201) throw new Error(`run start failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { run_id: res.body.run_id, ...remit };
}

export async function lease(d: RunDaemon, kinds: string[] = ['model', 'tool', 'action'], extra: Record<string, unknown> = {}): Promise<{ status: number; body: any }> {
  return d.kernel_('/leases', { body: { worker_id: 'w-1', kinds, ...extra } });
}

/** Leases the next step (it must exist) and completes it with `output`. */
export async function leaseAndComplete(d: RunDaemon, output: unknown, usage = { tokens: 10, usd: 0.01 }, kinds?: string[]): Promise<{ lease: any; done: any }> {
  const l = await lease(d, kinds);
  if (l.status !== 200) throw new Error(`expected a lease, got ${l.status} ${JSON.stringify(l.body)}`);
  const done = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output, usage } });
  if (done.status !== 200) throw new Error(`complete failed: ${done.status} ${JSON.stringify(done.body)}`);
  return { lease: l.body, done: done.body };
}

export async function getRun(d: RunDaemon, runId: string): Promise<any> {
  return (await d.kernel_(`/runs/${runId}`)).body;
}

export async function allEvents(d: RunDaemon, runId: string): Promise<any[]> {
  const out: any[] = [];
  let from = 1;
  for (;;) {
    const page = await d.kernel_(`/runs/${runId}/events?from_seq=${from}&limit=1000`);
    out.push(...page.body.events);
    if (page.body.events.length < 1000) return out;
    from = page.body.next_seq;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The refunds policy of the action tests (decisions 5.1 syntax). */
export const REFUNDS_POLICY = `# refunds policy
deny no_export
  when action.tool == "billing.export"

require_approval large_refund by "role:finance"
  when action.tool == "billing.refund" && action.args.amount > 100

allow small_refund
  when action.tool == "billing.refund" && action.args.amount <= 100
`;

/** Starts a refunds run under the refunds policy and leases its action step (triage and lookup completed). */
export async function runToAction(d: RunDaemon, o: MintOptions & { amount?: number } = {}): Promise<{ run_id: string; remit_id: string; lease: any }> {
  const bundleId = await pushBundle(d);
  const existing = await d.kernel_('/policies/refunds/1');
  if (existing.status === 404) await pushPolicy(d, 'refunds', '1', REFUNDS_POLICY);
  const run = await startRun(d, bundleId, { policy_set: ['refunds'], ...o });
  await leaseAndComplete(d, { amount: o.amount ?? 150 }, undefined, ['model']);
  await leaseAndComplete(d, { rows: [] }, undefined, ['tool']);
  const l = await lease(d, ['action']);
  if (l.status !== 200) throw new Error(`no action lease: ${l.status}`);
  return { run_id: run.run_id, remit_id: run.remit_id, lease: l.body };
}

export async function propose(d: RunDaemon, leaseId: string, action: Record<string, unknown>): Promise<{ status: number; body: any }> {
  return d.kernel_(`/leases/${leaseId}/actions`, { body: { action } });
}

/**
 * Four workers leasing and completing eight three-step runs at once (D §6): no step is handed
 * to two of them, all 24 are handed out, and every run completes with a chain replay accepts.
 * Shared by the SQLite (leases.test.ts) and PostgreSQL (pg-kernel.test.ts) kernels.
 */
export async function fourWorkersOverEightRuns(d: RunDaemon): Promise<void> {
  const bundleId = await pushBundle(d);
  const runs: string[] = [];
  for (let i = 0; i < 8; i++) runs.push((await startRun(d, bundleId, { autonomy: 'autonomous' })).run_id);
  const handed = new Set<string>();
  const outputs: Record<string, unknown> = { triage: { amount: 1 }, lookup: { rows: [] }, refund: { id: 'rf' } };
  const worker = async (name: string) => {
    for (;;) {
      const l = await d.kernel_('/leases', { body: { worker_id: name, kinds: ['model', 'tool', 'action'], wait_seconds: 0.3 } });
      if (l.status === 204) return;
      expect(l.status, JSON.stringify(l.body)).toBe(200);
      const key = `${l.body.run_id}/${l.body.step}/${l.body.attempt}`;
      expect(handed.has(key), key).toBe(false);
      handed.add(key);
      const done = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output: outputs[l.body.step], usage: { tokens: 1, usd: 0 } } });
      expect(done.status, JSON.stringify(done.body)).toBe(200);
    }
  };
  await Promise.all(['a', 'b', 'c', 'd'].map(worker));
  expect(handed.size).toBe(24);
  for (const r of runs) {
    expect((await getRun(d, r)).state).toBe('completed');
    expect((await d.kernel_(`/runs/${r}/replay`, { method: 'POST' })).body).toMatchObject({ chain_valid: true, state_matches: true });
  }
}

/**
 * A run parked for a human, made through the real kernel API (interface 3, 4.1 rule 4;
 * decisions 4, 5.2, 5.4): a signed bundle with one action step, a remit whose requester's
 * manager role is `finance`, a run, an action lease and a proposal that the default rule
 * (a write to a system of record, no policy) sends to `role:finance`.
 */
import { signBundle } from '../../src/bundle/sign.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';

export type KernelCall = (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>;

/** A publisher key to pass to svcd (`--publisher` / `kernel.publishers`) and sign with. */
export function testPublisher(): ReturnType<typeof generatePublisherKey> & { spec: string } {
  const p = generatePublisherKey();
  return { ...p, spec: `${p.key_id}:${p.public_key}` };
}

export const REQUESTER = { id: 'alice', role: 'support', manager: 'finance' };

export const BUNDLE = {
  name: 'inbox-refunds',
  version: '1.0.0',
  description: 'refunds, for the approvals inbox tests',
  department: 'support',
  systems_of_record: ['billing'],
  tools: { 'billing.refund': { writes: true } },
  workflows: {
    refund: {
      input_schema: { type: 'object', required: ['invoice_id', 'amount'], properties: { invoice_id: { type: 'string' }, amount: { type: 'number' } } },
      steps: [{ id: 'refund', kind: 'action', tool: 'billing.refund', args: { invoice_id: '{{input.invoice_id}}', amount: '{{input.amount}}' } }],
    },
  },
};

export interface ParkedRun {
  run_id: string;
  approval_id: string;
  action_id: string;
  action: { tool: string; args: Record<string, unknown>; summary: string };
}

async function expectStatus(call: KernelCall, method: string, path: string, body: unknown, status: number): Promise<any> {
  const res = await call(method, path, body);
  if (res.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Parks a new run on an approval for role:finance; `invoice` varies the proposal. */
export async function parkRun(call: KernelCall, publisher: ReturnType<typeof testPublisher>, invoice = 'INV-7', amount = 250): Promise<ParkedRun> {
  const posted = await call('POST', '/bundles', { bundle: BUNDLE, signature: signBundle(BUNDLE, publisher) });
  if (posted.status !== 201 && posted.status !== 200) throw new Error(`POST /bundles: ${posted.status} ${JSON.stringify(posted.body)}`);
  const remit = await expectStatus(
    call,
    'POST',
    '/remits',
    { tools: ['billing.*'], scopes: ['billing:*'], grants: [], spend: { tokens: 100000, usd: 10 }, autonomy: 'supervised', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER },
    201,
  );
  const run = await expectStatus(
    call,
    'POST',
    '/runs',
    { bundle_id: posted.body.bundle_id, workflow: 'refund', input: { invoice_id: invoice, amount }, remit_id: remit.remit_id, requested_by: REQUESTER },
    201,
  );
  const lease = await expectStatus(call, 'POST', '/leases', { worker_id: 'inbox-test-worker', kinds: ['action'], ttl_seconds: 60 }, 200);
  if (lease.run_id !== run.run_id) throw new Error(`leased ${lease.run_id}, expected ${run.run_id}`);
  const action = { tool: 'billing.refund', args: { invoice_id: invoice, amount }, summary: `Refund ${amount} USD on ${invoice}` };
  const proposal = await expectStatus(call, 'POST', `/leases/${lease.lease_id}/actions`, { action }, 200);
  if (proposal.decision !== 'approval_required') throw new Error(`expected approval_required, got ${JSON.stringify(proposal)}`);
  return { run_id: run.run_id, approval_id: proposal.approval_id, action_id: proposal.action_id, action };
}

/** A KernelCall over fetch for a kernel base address. */
export function kernelCall(base: string): KernelCall {
  return async (method, path, body) => {
    const res = await fetch(`${base}/v1${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
}

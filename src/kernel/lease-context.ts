/**
 * What a worker receives with a lease (interface 2.6, decisions §4, §6, §8): the step
 * definition with its `args` rendered, and the context (input, earlier outputs, the run, the
 * run-bound remit token and the remit's limits, the bundle's prompts/mock/pacing, descriptors
 * of the step's tools, approved actions, prior events, budget).
 */
import { renderTemplates } from '../bundle/templates.js';
import type { Bundle, LeaseKind, RemitPayload, Requester, RunEvent, Spend, StepDef, ToolDescriptor } from '../types.js';
import type { Kernel } from './kernel.js';
import { spendLeft } from '../spend.js';
import type { RunModel } from './reducer.js';

/** A tool descriptor as a lease carries it: the gateway's, plus what the kernel decided. */
export interface LeaseToolDescriptor extends ToolDescriptor {
  /** The connector is a system of record of the bundle (or the tool is unknown). */
  system_of_record: boolean;
  /** False when no gateway could describe the tool: it is then treated as a write to a system of record. */
  known: boolean;
}

/** The lease `context` (interface 2.6). */
export interface LeaseContext {
  input: unknown;
  steps: Record<string, { output: unknown }>;
  run: { id: string; bundle: string; bundle_id: string; bundle_version: string; workflow: string; requested_by: Requester; department: string; parent_run_id: string | null };
  remit_token: string;
  remit: { autonomy: RemitPayload['autonomy']; grants: string[]; tools: string[]; scopes: string[] };
  prompts: Record<string, string>;
  mock: NonNullable<Bundle['mock']>;
  tools: LeaseToolDescriptor[];
  pacing: NonNullable<Bundle['pacing']>;
  approved_actions: string[];
  prior_events: RunEvent[];
  /**
   * seq of the step's first `step.leased`, where `prior_events` would start were it not cut to
   * its last PRIOR_EVENTS_MAX (on the first lease, this lease's own: nothing comes before it).
   * A worker whose first prior event comes later reads the rest with GET /runs/{id}/events: a
   * step's recorded model answers must all be replayed, or a write runs twice.
   */
  prior_events_from_seq: number | null;
  budget: { tokens: number; usd: number; used_tokens: number; used_usd: number };
}

/** Outputs of completed steps, as templates and `context.steps` see them. */
export function completedOutputs(m: RunModel): Record<string, { output: unknown }> {
  const out: Record<string, { output: unknown }> = {};
  for (const id of m.step_order) {
    const s = m.steps[id]!;
    if (s.state === 'completed' || s.state === 'compensating' || s.state === 'compensated') out[id] = { output: s.output };
  }
  return out;
}

/**
 * The step definition handed out: `args` rendered (decisions §4). For a compensation lease,
 * `{id, kind: "compensation", compensates, tool, args}` rendered with the step's own output
 * readable. Throws when a template does not render (a deterministic step failure).
 */
export async function renderStepDef(m: RunModel, stepId: string, kind: LeaseKind, def: StepDef): Promise<Record<string, unknown>> {
  const scope = { input: m.input, steps: completedOutputs(m) };
  if (kind === 'compensation') {
    const comp = def.compensate!;
    const args = comp.args === undefined ? {} : renderTemplates(comp.args, scope);
    return { ...comp, id: stepId, kind: 'compensation', compensates: stepId, tool: comp.tool, args };
  }
  const out: Record<string, unknown> = { ...def };
  if (def.args !== undefined) out.args = renderTemplates(def.args, scope);
  return out;
}

/** The tools a step may use: the model step's `tools`, the tool/action step's `tool`, the compensation's tool. */
export function stepTools(def: StepDef, kind: LeaseKind): string[] {
  if (kind === 'compensation') return def.compensate ? [def.compensate.tool] : [];
  const ids = [...(def.tools ?? [])];
  if (def.tool && !ids.includes(def.tool)) ids.push(def.tool);
  return ids;
}

/** A descriptor from the gateway, or the fail-safe one for a tool nobody can describe (decisions 5.2). */
export async function describeTool(k: Pick<Kernel, 'toolCatalog'>, bundle: Bundle, toolId: string): Promise<LeaseToolDescriptor> {
  const dot = toolId.indexOf('.');
  const connector = dot > 0 ? toolId.slice(0, dot) : toolId;
  const sor = (bundle.systems_of_record ?? []).includes(connector);
  let d: ToolDescriptor | null = null;
  try {
    d = (await k.toolCatalog?.describe(toolId)) ?? null;
  } catch {
    d = null;
  }
  // The bundle's description was written for this workflow's model: it wins over the
  // gateway's generic one; the gateway stays authoritative for everything else (writes).
  const ownDescription = bundle.tools?.[toolId]?.description;
  if (d) return { ...d, description: typeof ownDescription === 'string' && ownDescription !== '' ? ownDescription : d.description, system_of_record: sor, known: true };
  return {
    id: toolId,
    connector,
    description: bundle.tools?.[toolId]?.description ?? '',
    writes: true,
    input_schema: {},
    scope_derivation: 'unknown',
    contract: { required: {} },
    system_of_record: true,
    known: false,
  };
}

/**
 * Asks the catalog for a step's tools before its lease is committed, so a gateway slow to
 * answer (out of reach: the fetch waits its 5 s) delays the lease rather than eat into it:
 * asked only after the commit, the answer came 5 s into the ttl, and the worker, counting
 * the ttl from the answer, held the lease 5 s past the kernel's expiry (network sweep). The
 * context is then built from what the catalog keeps.
 */
export async function warmToolDescriptors(k: Pick<Kernel, 'toolCatalog'>, def: StepDef, kind: LeaseKind): Promise<void> {
  const catalog = k.toolCatalog;
  if (catalog) await Promise.all(stepTools(def, kind).map((id) => catalog.describe(id).catch(() => null)));
}

export interface ContextParts {
  model: RunModel;
  bundle: Bundle;
  step: string;
  kind: LeaseKind;
  def: StepDef;
  remitToken: string;
  remit: RemitPayload;
  priorEvents: RunEvent[];
  priorEventsFromSeq: number | null;
  /** Spend derived remits reserved from the run's remit (decisions 8.3): not this run's to use. */
  reserved: Spend;
}

export async function buildLeaseContext(k: Pick<Kernel, 'toolCatalog'>, p: ContextParts): Promise<LeaseContext> {
  const m = p.model;
  const tools: LeaseToolDescriptor[] = [];
  for (const id of stepTools(p.def, p.kind)) tools.push(await describeTool(k, p.bundle, id));
  return {
    input: m.input,
    steps: completedOutputs(m),
    run: {
      id: m.run_id,
      bundle: m.bundle.name,
      bundle_id: m.bundle_id,
      bundle_version: m.bundle.version,
      workflow: m.workflow,
      requested_by: m.requested_by,
      department: m.department,
      parent_run_id: m.parent_run_id,
    },
    remit_token: p.remitToken,
    remit: { autonomy: p.remit.autonomy, grants: p.remit.grants, tools: p.remit.tools, scopes: p.remit.scopes },
    prompts: p.bundle.prompts ?? {},
    mock: p.bundle.mock ?? {},
    tools,
    pacing: p.bundle.pacing ?? {},
    approved_actions: [...(m.steps[p.step]?.approved_actions ?? [])],
    prior_events: p.priorEvents,
    prior_events_from_seq: p.priorEventsFromSeq,
    // What this run may spend in all: its remit's spend less what derived remits reserved, so
    // a worker reads its headroom as budget − used, the same line the kernel fails the run at.
    budget: { ...spendLeft(m.budget, p.reserved), used_tokens: m.usage.tokens, used_usd: m.usage.usd },
  };
}

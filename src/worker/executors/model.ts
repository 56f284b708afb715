/**
 * A `model` step: the agent loop.
 *
 *   render the prompt → data boundary → provider → tool calls through the gateway and actions
 *   through proposals → … → output
 *
 * Every model call, tool call and action gets a call index (0, 1, 2, … in loop order). A model
 * call's answer is recorded as a `model.called` event with its index; a later lease of the step
 * (after a park for approval, a lost lease or a retried failure) replays recorded answers
 * instead of calling the provider, so the loop walks the same path: tool calls reuse their
 * idempotency keys (the gateway answers from its store), the same proposals get the same
 * action ids (an approval applies), and nothing runs twice.
 *
 * The boundary applies to everything the provider is sent: each value a prompt template reads
 * and each tool result is redacted for the classes the remit does not grant, and one `note`
 * event per redaction (class, path, count) is posted before the provider call that would have
 * seen it.
 */
import { renderTemplates, TemplateError, templateRefs, type TemplateContext } from '../../bundle/templates.js';
import { pointerToken } from '../../encoding/json-pointer.js';
import type { MockStepScript, ToolDescriptor } from '../../types.js';
import { DataBoundary, fieldClassesOf, redactionNote, type Redacted, type Redaction } from '../data-boundary.js';
import { StepError, throwIfAborted } from '../errors.js';
import type { ChatMessage, ProviderCall, ProviderResponse, ProviderTool } from '../providers/provider.js';
import { WORKER_EVENT_SOURCE } from '../step-history.js';
import type { StepRuntime } from '../step-runtime.js';
import type { StepOutcome } from '../types.js';
import { actionSummary, deniedMessage, proposeAndExecute, rejectionReason } from './action.js';
import { isArgs } from './tool.js';

/** Gateway failures the model is told about (it can correct itself) instead of failing the step. */
const RECOVERABLE_TOOL_ERRORS = new Set(['args_invalid', 'tool_not_found']);

/** JSON pointers of the paths the templates in `value` read (`steps.a.output.x` → `/steps/a/output/x`). */
function templatePointers(value: unknown): string[] {
  return templateRefs(value)
    .filter((r) => r.path !== null)
    .map((r) => r.path!.map((seg) => '/' + pointerToken(seg)).join(''));
}

/** True for a redaction marker: a template reading below it gets the marker itself. */
function isMarker(v: unknown): v is string {
  return typeof v === 'string' && /^\[REDACTED:[^\]]+\]$/.test(v);
}

/**
 * The context as the boundary lets it through: `input` and each step's `output` redacted as one
 * (literals found in one are removed from all), with every redaction's JSON pointer.
 */
function redactContext(boundary: DataBoundary, input: unknown, steps: Record<string, { output: unknown }>): { ctx: { input: unknown; steps: Record<string, { output: unknown }> }; redactions: Redaction[] } {
  const ids = Object.keys(steps ?? {});
  const r = boundary.redactParts([
    { value: input, path: '/input' },
    ...ids.map((id) => ({ value: steps[id]?.output, path: `/steps/${pointerToken(id)}/output` })),
  ]);
  const redSteps: Record<string, { output: unknown }> = {};
  ids.forEach((id, i) => (redSteps[id] = { output: r.values[i + 1] }));
  return { ctx: { input: r.values[0], steps: redSteps }, redactions: r.redactions };
}

/**
 * Renders `value` with the kernel's own templates (decisions §4: the worker accepts exactly
 * what the kernel does): each path is looked up in the raw context, so a missing value is a
 * deterministic `template_invalid`, but what is inserted is the boundary's redacted view of
 * it (a path below a redaction marker gets the marker itself).
 */
function renderThroughBoundary(value: unknown, raw: TemplateContext, redacted: TemplateContext, where: string): unknown {
  const view = (path: string[]) => {
    let cur: unknown = redacted;
    for (const seg of path) {
      if (isMarker(cur)) return cur;
      cur = cur !== null && typeof cur === 'object' ? (cur as Record<string, unknown>)[seg] : undefined;
    }
    return cur;
  };
  try {
    return renderTemplates(value, raw, view);
  } catch (err) {
    if (err instanceof TemplateError) throw new StepError('template_invalid', `${where}: ${err.message}`, true);
    throw err;
  }
}

/** Redactions a prompt actually carries: those at, under or above a pointer its templates read. */
function relevant(redactions: Redaction[], pointers: string[]): Redaction[] {
  return redactions.filter((r) => pointers.some((p) => r.path === p || r.path.startsWith(p + '/') || p.startsWith(r.path + '/')));
}

function systemPrompt(rt: StepRuntime, schema: unknown, tools: ProviderTool[]): string {
  const run = rt.lease.context.run;
  const lines = [
    `You are the "${rt.lease.step}" step of the "${run?.workflow ?? ''}" workflow of the "${run?.bundle ?? ''}" bundle.`,
    tools.length > 0 ? 'Call the tools you need. Tools that change a system are proposals: policy decides them and a human may have to approve.' : 'No tools are available in this step.',
    'Values shown as [REDACTED:<class>] are withheld from you on purpose; do not guess them.',
    'When you are done, answer with the step output as one JSON value and nothing else.',
  ];
  if (schema && typeof schema === 'object') lines.push(`The output must match this JSON Schema: ${JSON.stringify(schema)}`);
  return lines.join('\n');
}

/**
 * Gateway outcomes of a write that ran, and of one that may have (src/gateway/call.ts):
 * `store_failed` covers both a claim that failed before anything ran and a result that could
 * not be kept after it did, so it only may have.
 */
const RAN = new Set(['ok']);
const MAY_HAVE_RUN = new Set(['upstream_error', 'idempotency_outcome_unknown', 'store_failed']);

/**
 * For a step resumed after a quarantine: the actions allowed before it that ran (or may have),
 * by the gateway's last outcome under the key the action keeps (`StepRuntime.actionKey`); null
 * when there are none.
 */
export function resumeNote(rt: StepRuntime): string | null {
  if (rt.history.segment === 0) return null;
  const lines: string[] = [];
  for (const a of rt.history.earlierActions) {
    const outcome = rt.history.toolOutcome(rt.actionKey(a.action_id));
    if (outcome === undefined) continue;
    if (RAN.has(outcome)) lines.push(`- ran: ${a.summary}`);
    else if (MAY_HAVE_RUN.has(outcome)) lines.push(`- may have run (its outcome is not known): ${a.summary}`);
  }
  if (lines.length === 0) return null;
  return [
    'This step was stopped and then resumed by an operator. Earlier attempts of it already did these actions:',
    ...lines,
    'Do not do them again unless the task needs them a second time.',
  ].join('\n');
}

function providerTools(offered: string[], descriptors: Map<string, Partial<ToolDescriptor>>): ProviderTool[] {
  return offered.map((id) => {
    const d = descriptors.get(id);
    return {
      id,
      description: typeof d?.description === 'string' ? d.description : '',
      input_schema: isArgs(d?.input_schema) ? d.input_schema : { type: 'object' },
      // A tool nobody describes is treated as a write (decisions 5.2 fails safe the same way).
      writes: d?.writes === undefined ? true : Boolean(d.writes),
    };
  });
}

/**
 * The step's prompt, with every value it reads passed through the boundary and its own text
 * redacted too; the redactions go to `pending`. Empty when the step names none (the mock
 * provider needs none).
 */
function promptThroughBoundary(rt: StepRuntime, boundary: DataBoundary, raw: TemplateContext, context: ReturnType<typeof redactContext>, pending: Redaction[]): string {
  const { lease } = rt;
  const def = lease.step_def ?? {};
  if (typeof def.prompt === 'string' && def.prompt !== '') {
    const template = lease.context.prompts?.[def.prompt];
    if (typeof template !== 'string') throw new StepError('prompt_not_found', `prompt "${def.prompt}" is not in the bundle`, true);
    const rendered = renderThroughBoundary(template, raw, context.ctx, `prompt ${def.prompt}`);
    const promptText = typeof rendered === 'string' ? rendered : JSON.stringify(rendered); // a prompt that is one template of an object
    pending.push(...relevant(context.redactions, templatePointers(template)));
    const literal = boundary.redact(promptText, '/prompt');
    pending.push(...literal.redactions);
    return String(literal.value);
  }
  if (rt.deps.provider.name !== 'mock') throw new StepError('step_invalid', `model step ${lease.step} names no prompt`, true);
  return '';
}

/**
 * The bundle's mock script for this step, rendered. The mock provider stands in for a model:
 * what its script reads crosses the boundary like a prompt, and each redaction in it is noted
 * too (interface 5.5), once per path: those not already in `pending` are added.
 */
function mockThroughBoundary(rt: StepRuntime, raw: TemplateContext, context: ReturnType<typeof redactContext>, pending: Redaction[]): MockStepScript | undefined {
  const step = rt.lease.step;
  const mockScript = rt.lease.context.mock?.[step];
  const mock = mockScript && typeof mockScript === 'object' ? (renderThroughBoundary(mockScript, raw, context.ctx, `mock ${step}`) as typeof mockScript) : undefined;
  if (mock) {
    const noted = new Set(pending.map((r) => `${r.class}\u0000${r.path}`));
    for (const r of relevant(context.redactions, templatePointers(mockScript))) {
      if (!noted.has(`${r.class}\u0000${r.path}`)) pending.push(r);
    }
  }
  return mock;
}

export async function executeModel(rt: StepRuntime): Promise<StepOutcome> {
  const { lease } = rt;
  const def = lease.step_def ?? {};
  const ctx = lease.context;
  const provider = rt.deps.provider;
  const maxTurns = rt.deps.maxTurns ?? 16;
  const descriptors = await rt.descriptors();
  const offered = Array.isArray(def.tools) ? def.tools.filter((t): t is string => typeof t === 'string') : [];
  const grants = Array.isArray(ctx.remit?.grants) ? ctx.remit.grants : [];
  const boundary = new DataBoundary({ grants, fieldClasses: fieldClassesOf(descriptors.values()) });
  const raw = { input: ctx.input, steps: ctx.steps ?? {} };
  const context = redactContext(boundary, raw.input, raw.steps);
  let pending: Redaction[] = [];
  // Tool descriptions and schemas reach the model too, and an MCP server writes its own:
  // their strings cross the boundary (a property named `email` stays a property).
  const asText = (v: unknown, path: string) => boundary.redactStrings(v, path);
  let tools = toolsThrough(providerTools(offered, descriptors), asText, pending);
  let outputSchema = isArgs(def.output_schema) ? through(def.output_schema, '/output_schema', asText, pending) : undefined;

  const promptText = promptThroughBoundary(rt, boundary, raw, context, pending);
  const mock = mockThroughBoundary(rt, raw, context, pending);

  const messages: ChatMessage[] = [
    { role: 'system', content: systemPrompt(rt, outputSchema, tools) },
    { role: 'user', content: promptText },
  ];
  // Resumed after a quarantine, the model is asked afresh: it is told which of the actions
  // allowed before then ran, so it does not propose them again in other words (a reworded
  // refund is another action, and would run). Through the boundary like any prompt.
  const earlier = resumeNote(rt);
  if (earlier !== null) {
    const r = boundary.redact(earlier, '/resumed');
    pending.push(...r.redactions);
    messages.push({ role: 'user', content: String(r.value) });
  }

  // Everything about to go to the provider, scrubbed of the literals learned so far.
  let scrubbedWith = -1;
  const scrubOutgoing = () => {
    const known = (v: unknown, path: string) => boundary.scrubKnownIn(v, path);
    messages.forEach((m, i) => (messages[i] = scrubMessage(boundary, m, i, pending)));
    tools = toolsThrough(tools, known, pending);
    if (outputSchema) outputSchema = through(outputSchema, '/output_schema', known, pending);
    scrubbedWith = boundary.knownCount;
  };

  // Answers of a segment before a quarantine that no lease reported (its last lease expired)
  // are not replayed; their usage is reported by this lease all the same.
  rt.addUsage(rt.history.carried);

  let index = 0;
  for (let turn = 0; turn < maxTurns; turn++) {
    throwIfAborted(rt.signal);
    const callIndex = index++;
    let response: ProviderResponse;
    const recorded = rt.history.modelCall(callIndex);
    if (recorded) {
      response = recorded.response;
      if (!recorded.reported) rt.addUsage(recorded.usage);
      rt.deps.onActivity?.({ type: 'model', index: callIndex, replayed: true, usage: recorded.usage });
    } else {
      // What later results showed to be sensitive leaves everything built before them (a name
      // in the prompt, in an earlier result of the same turn, in a tool's description) before
      // it goes again. Scrubbed in place: a literal is noted once, in the turn it leaves; and
      // only when something was learned since the last scrub (what was added since was
      // redacted with all that was known then).
      if (boundary.knownCount !== scrubbedWith) scrubOutgoing();
      for (const r of pending) {
        await rt.postEvent('note', redactionNote(r, { source: WORKER_EVENT_SOURCE, step: lease.step, call_index: callIndex }));
        rt.deps.onActivity?.({ type: 'redaction', class: r.class, path: r.path, count: r.count });
      }
      response = await provider.complete({
        run_id: lease.run_id,
        step: lease.step,
        turn,
        messages: messages.slice(),
        tools,
        output_schema: outputSchema,
        mock,
        signal: rt.signal,
      });
      rt.addUsage(response.usage);
      rt.deps.onActivity?.({ type: 'model', index: callIndex, replayed: false, usage: response.usage });
      await rt.postEvent('model.called', {
        source: WORKER_EVENT_SOURCE,
        step: lease.step,
        call_index: callIndex,
        segment: rt.history.segment,
        turn,
        provider: provider.name,
        model: response.model ?? null,
        usage: response.usage,
        redactions: pending.length,
        response,
      });
    }
    pending = [];
    // Past the budget nothing more is worth doing: not the calls this answer asks for (they
    // would feed a next turn the kernel will refuse to pay for), not an output (the kernel
    // fails the run on this usage either way). The failure reports the usage.
    const over = rt.overBudget();
    if (over !== null) throw new StepError('budget_exhausted', over, true);
    // The model's own answer may quote what it was shown before that was known to be
    // sensitive: scrubbed now, as the results that follow it are redacted when they come.
    messages.push(scrubMessage(boundary, { role: 'assistant', content: response.content, calls: response.calls }, messages.length, pending));

    if (response.calls.length === 0) {
      return { type: 'completed', output: response.output === undefined ? null : response.output, usage: rt.usage };
    }
    // No answer may follow the last allowed one, so its calls' results could never be used:
    // do not run them (a write would be proposed, executed or parked for nothing).
    if (turn === maxTurns - 1) break;

    for (const call of response.calls) {
      const i = index++;
      const result = await runCall(rt, call, i, offered, descriptors);
      if (result.type === 'parked') return { type: 'parked', action_id: result.action_id, approval_id: result.approval_id, usage: rt.usage };
      const r = boundary.redact(result.value, `/calls/${i}/result`);
      pending.push(...r.redactions);
      messages.push({ role: 'tool', call_id: call.id, tool: call.tool, content: JSON.stringify(r.value ?? null) });
    }
  }
  throw new StepError('model_loop_exceeded', `the model made ${maxTurns} answers without a final output (the calls of the last one were not run)`, true);
}

type LeafWalk = (value: unknown, path: string) => Redacted<unknown>;

/** `value` through one of the boundary's walks (redactStrings, scrubKnownIn); redactions go to `pending`. */
function through<T>(value: T, path: string, walk: LeafWalk, pending: Redaction[]): T {
  const r = walk(value, path);
  pending.push(...r.redactions);
  return r.value as T;
}

/** Each tool's description and input schema through `walk`. */
function toolsThrough(tools: ProviderTool[], walk: LeafWalk, pending: Redaction[]): ProviderTool[] {
  return tools.map((t) => {
    const at = `/tools/${pointerToken(t.id)}`;
    return { ...t, description: String(through(t.description, `${at}/description`, walk, pending)), input_schema: through(t.input_schema, `${at}/input_schema`, walk, pending) };
  });
}

/** `m` with the boundary's known literals removed from its text and its calls' arguments; redactions go to `pending`. */
function scrubMessage(boundary: DataBoundary, m: ChatMessage, index: number, pending: Redaction[]): ChatMessage {
  const at = `/messages/${index}`;
  const text = (t: string | null) => {
    if (t === null) return null;
    const r = boundary.scrubKnown(t, at);
    pending.push(...r.redactions);
    return r.value;
  };
  if (m.role !== 'assistant') return { ...m, content: text(m.content)! };
  const calls = m.calls.map((c) => ({ ...c, args: through(c.args, at, (v, p) => boundary.scrubKnownIn(v, p), pending), ...(c.summary !== undefined ? { summary: text(c.summary)! } : {}) }));
  return { ...m, content: text(m.content), calls };
}

type CallResult = { type: 'value'; value: unknown } | { type: 'parked'; action_id: string; approval_id: string | null };

async function runCall(rt: StepRuntime, call: ProviderCall, index: number, offered: string[], descriptors: Map<string, Partial<ToolDescriptor>>): Promise<CallResult> {
  if ('_invalid' in call.args && Object.keys(call.args).length === 1) {
    return { type: 'value', value: { error: { code: 'args_invalid', message: 'arguments were not a JSON object' } } };
  }
  // Plain calls must name a tool the step offers; a scripted action (the mock's `actions`) is a
  // proposal, which policy and the remit bound instead.
  if (call.action !== true && !offered.includes(call.tool)) {
    return { type: 'value', value: { error: { code: 'tool_not_offered', message: `${call.tool} is not a tool of this step` } } };
  }
  const d = descriptors.get(call.tool);
  const isAction = call.action === true || d?.writes === true || d === undefined;
  if (isAction) {
    const r = await proposeAndExecute(rt, call.tool, call.args, actionSummary(call.tool, call.args, call.summary));
    // A denied proposal (by policy, or a rejected approval) is the model's to hear: it is the
    // call's result, with the approver's reason, and the model answers with it. An `action`
    // step, which has no model, fails on it instead.
    if (r.type === 'denied') {
      const reason = rejectionReason(rt, r.approval_id);
      return { type: 'value', value: { error: { code: 'action_denied', message: deniedMessage(call.tool, r.rule), ...(reason !== null ? { reason } : {}) } } };
    }
    if (r.type === 'parked') return r;
    return { type: 'value', value: r.result };
  }
  try {
    const res = await rt.callTool(call.tool, call.args, rt.callKey(index), index);
    return { type: 'value', value: res.result };
  } catch (err) {
    if (err instanceof StepError && RECOVERABLE_TOOL_ERRORS.has(err.code)) {
      return { type: 'value', value: { error: { code: err.code, message: err.message } } };
    }
    throw err;
  }
}


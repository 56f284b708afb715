/**
 * The mock provider: plays the bundle's `mock` script for the step (decisions §4), so bundles
 * can be run end to end without a model. A script `{output, tool_calls, actions, usage}` plays
 * as up to three answers: first the tool calls (when any), then the actions (when any), then
 * the output. It is stateless (the turn number picks the answer), so a run resumed after a park
 * sees exactly the same answers. `usage` is charged on the first answer only.
 *
 * `text` is the assistant text of every answer (else the final answer's text is the output's
 * JSON); `delay_ms` is waited before every answer, and the step's abort (timeout, shutdown,
 * lost lease) cuts it short; `error` makes the first answer fail, on every attempt, as a
 * provider would, so retries and failures can be rehearsed without a model.
 */
import type { MockStepScript } from '../../types.js';
import { abortReason, delayUnlessAborted, StepError } from '../errors.js';
import { ZERO_USAGE } from '../types.js';
import type { Provider, ProviderCall, ProviderRequest, ProviderResponse } from './provider.js';
import { isRecord } from '../../util/is-record.js';

/** The answers a script plays, in order. */
export function mockPhases(script: MockStepScript): Array<Pick<ProviderResponse, 'calls' | 'output'>> {
  const phases: Array<Pick<ProviderResponse, 'calls' | 'output'>> = [];
  const toolCalls = Array.isArray(script.tool_calls) ? script.tool_calls : [];
  const actions = Array.isArray(script.actions) ? script.actions : [];
  if (toolCalls.length > 0) {
    phases.push({
      calls: toolCalls.map((c, i) => {
        if (!isRecord(c) || typeof c.tool !== 'string') throw new StepError('model_output_invalid', `mock tool_calls[${i}] needs a tool`, true);
        return { id: `mock_t${i}`, tool: c.tool, args: isRecord(c.args) ? c.args : {} };
      }),
    });
  }
  if (actions.length > 0) {
    phases.push({
      calls: actions.map((a, i): ProviderCall => {
        if (!isRecord(a) || typeof a.tool !== 'string') throw new StepError('model_output_invalid', `mock actions[${i}] needs a tool`, true);
        return {
          id: `mock_a${i}`,
          tool: a.tool,
          args: isRecord(a.args) ? a.args : {},
          action: true,
          summary: typeof a.summary === 'string' ? a.summary : undefined,
        };
      }),
    });
  }
  phases.push({ calls: [], output: script.output === undefined ? null : script.output });
  return phases;
}

/** The failure a script's `error` stands for; its code's own `deterministic` unless the script says. */
export function mockError(step: string, error: unknown): StepError | null {
  if (!isRecord(error) || typeof error.code !== 'string' || error.code === '') return null;
  const message = typeof error.message === 'string' && error.message !== '' ? error.message : `the mock script of step ${step} fails with ${error.code}`;
  return new StepError(error.code, message, typeof error.deterministic === 'boolean' ? error.deterministic : undefined);
}

export class MockProvider implements Provider {
  readonly name = 'mock';

  async complete(req: ProviderRequest): Promise<ProviderResponse> {
    if (req.signal.aborted) throw abortReason(req.signal);
    if (!req.mock || !isRecord(req.mock)) throw new StepError('mock_script_missing', `bundle has no mock script for step ${req.step}`, true);
    const script: MockStepScript = req.mock;
    const delayMs = Math.max(0, Math.floor(Number(script.delay_ms) || 0));
    if (delayMs > 0) await delayUnlessAborted(delayMs, req.signal);
    if (req.turn === 0) {
      const failure = mockError(req.step, script.error);
      if (failure) throw failure;
    }
    const phases = mockPhases(script);
    const phase = phases[Math.min(req.turn, phases.length - 1)]!;
    const usage =
      req.turn === 0
        ? { tokens: Math.max(0, Math.floor(Number(script.usage?.tokens) || 0)), usd: Math.max(0, Number(script.usage?.usd) || 0) }
        : { ...ZERO_USAGE };
    const text = typeof script.text === 'string' ? script.text : null;
    const content = text ?? (phase.calls.length === 0 ? JSON.stringify(phase.output) : null);
    return { content, output: phase.output, calls: phase.calls, usage, model: 'mock' };
  }
}

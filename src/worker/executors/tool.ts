/** A `tool` step: one gateway call with the step's rendered args (decisions §4). */
import { StepError } from '../errors.js';
import type { StepRuntime } from '../step-runtime.js';
import type { StepOutcome } from '../types.js';

export async function executeTool(rt: StepRuntime): Promise<StepOutcome> {
  const def = rt.lease.step_def ?? {};
  if (typeof def.tool !== 'string' || def.tool === '') throw new StepError('step_invalid', `tool step ${rt.lease.step} has no tool`, true);
  const args = isArgs(def.args) ? def.args : {};
  // A tool no descriptor describes is taken for a write (the safe side: a resumed step replays
  // it rather than running it twice).
  const writes = (await rt.descriptors({ required: false })).get(def.tool)?.writes ?? true;
  const res = await rt.callTool(def.tool, args, writes ? rt.writeKey(0) : rt.callKey(0), 0);
  return { type: 'completed', output: res.result, usage: rt.usage };
}

export function isArgs(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

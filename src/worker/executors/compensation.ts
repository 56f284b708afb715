/**
 * A `compensation` lease (decisions §6, abandon): the step's `compensate` tool with its rendered
 * args, called through the gateway under a key of its own, so a retried compensation runs once.
 * It is not proposed: abandoning the run is the operator's decision, and the remit still bounds
 * the call at the gateway.
 */
import { StepError } from '../errors.js';
import type { StepRuntime } from '../step-runtime.js';
import type { StepOutcome } from '../types.js';
import { isArgs } from './tool.js';

export async function executeCompensation(rt: StepRuntime): Promise<StepOutcome> {
  const def = rt.lease.step_def ?? {};
  const comp = isArgs(def.compensate) && typeof def.compensate.tool === 'string' ? def.compensate : null;
  const tool = comp?.tool ?? (typeof def.tool === 'string' ? def.tool : '');
  if (!tool) throw new StepError('step_invalid', `compensation of ${rt.lease.step} has no tool`, true);
  const args = comp ? (isArgs(comp.args) ? comp.args : {}) : isArgs(def.args) ? def.args : {};
  const res = await rt.callTool(tool, args, rt.compensationKey(), null);
  return { type: 'completed', output: res.result, usage: rt.usage };
}

/**
 * What a model provider is to the worker: one chat turn in, one answer out (text, a final
 * output, or calls of tools). Providers never see a credential of svc and only ever receive
 * messages that went through the data boundary.
 */
import type { MockStepScript } from '../../types.js';
import type { Usage } from '../types.js';

/** A tool or action the model asks for. */
export interface ProviderCall {
  /** Provider-assigned id, echoed in the tool result message. */
  id: string;
  /** Tool id `<connector>.<operation>`. */
  tool: string;
  args: Record<string, unknown>;
  /** True when the provider marks it as a proposed action (the mock's `actions`). */
  action?: boolean;
  /** One line for approvers (actions). */
  summary?: string;
}

export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; calls: ProviderCall[] }
  | { role: 'tool'; call_id: string; tool: string; content: string };

/** A tool offered to the model in this step. */
export interface ProviderTool {
  id: string;
  description: string;
  input_schema: Record<string, unknown>;
  /** Calls of it are proposed actions (decided by policy) rather than plain calls. */
  writes: boolean;
}

export interface ProviderRequest {
  run_id: string;
  step: string;
  /** 0 for the first answer in the step, then 1, 2, … */
  turn: number;
  messages: ChatMessage[];
  tools: ProviderTool[];
  output_schema?: Record<string, unknown>;
  /** The bundle's mock script for the step, rendered against the redacted context. */
  mock?: MockStepScript;
  signal: AbortSignal;
}

export interface ProviderResponse {
  /** Assistant text, when any. */
  content: string | null;
  /** The step output, when the provider states it directly (the mock). */
  output?: unknown;
  /** Calls the model wants made before it answers; none means this is the final answer. */
  calls: ProviderCall[];
  usage: Usage;
  /** Model name, for the `model.called` event. */
  model?: string;
}

export interface Provider {
  /** `mock` or `openai`. */
  readonly name: string;
  complete(req: ProviderRequest): Promise<ProviderResponse>;
}

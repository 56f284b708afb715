/** The worker runtime's public surface (explicit named exports). */
export { Worker, ALL_KINDS, defaultWorkerId, type WorkerOptions } from './worker.js';
export type { WorkerEventMap, WorkerEventName, StepInfo } from './events.js';
export { KernelClient, type LeaseRequest, type ProposalResult } from './kernel-client.js';
export { GatewayClient, gatewayFailure, type ToolCallRequest, type ToolCallResult } from './gateway-client.js';
export { StepError, LeaseLostError, WORKER_ERROR_CODES, type WorkerErrorCode } from './errors.js';
export { createProvider, PROVIDER_NAMES, type ProviderName } from './providers/index.js';
export { MockProvider } from './providers/mock.js';
export { OpenAiProvider, openAiOptionsFromEnv, type OpenAiOptions } from './providers/openai.js';
export type { Provider, ProviderRequest, ProviderResponse, ProviderCall, ChatMessage } from './providers/provider.js';
export { redactValue, redactText, fieldClassesOf, marker, redactionNote, type BoundaryPolicy, type Redaction } from './data-boundary.js';
export { BUILTIN_DETECTORS, detect, findAll, luhnValid, isCardNumber, type Detector, type Finding } from './detectors.js';
export { idempotencyKey } from './step-runtime.js';
export type { Lease, LeaseContext, LeasedStepDef, PriorEvent, KindPacing, Usage } from './types.js';

/**
 * Provider names the worker accepts (`svc worker --provider`), apart from their factory in
 * ./index.ts so that `svc worker --help` lists them without loading the providers (docs/design.md,
 * "CLI start-up").
 */
export const PROVIDER_NAMES = ['mock', 'openai'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

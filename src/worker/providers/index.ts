/** Provider names the worker accepts (`svc worker --provider`) and their factory. */
import { MockProvider } from './mock.js';
import { OpenAiProvider, openAiOptionsFromEnv } from './openai.js';
import type { Provider } from './provider.js';
import { PROVIDER_NAMES, type ProviderName } from './names.js';

export { PROVIDER_NAMES, type ProviderName };

/** What a provider may tell its caller besides its answers. */
export interface ProviderHooks {
  /** Something the operator should know that fails nothing (`svc worker` logs it as a warning). (Default: none) */
  onWarning?: (message: string, fields: Record<string, unknown>) => void;
}

/** A provider by name; `openai` reads SVC_OPENAI_* from `env`. */
export function createProvider(name: ProviderName, env: NodeJS.ProcessEnv = process.env, hooks: ProviderHooks = {}): Provider {
  switch (name) {
    case 'mock':
      return new MockProvider();
    case 'openai':
      return new OpenAiProvider({ ...openAiOptionsFromEnv(env), onWarning: hooks.onWarning });
  }
}

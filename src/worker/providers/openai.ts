/**
 * An OpenAI-compatible chat-completions provider with tool calling (`POST {base}/chat/completions`),
 * which also fits local servers that speak the same API (vLLM, llama.cpp, Ollama).
 *
 * Configuration (environment, documented in man/svc-worker.1):
 * - SVC_OPENAI_BASE_URL: API base including its version path. (Default: https://api.openai.com/v1)
 * - SVC_OPENAI_API_KEY: bearer key; registered with the log redactor. (Default: none, no header)
 * - SVC_OPENAI_MODEL: model name. (Default: gpt-4o-mini)
 * - SVC_OPENAI_TIMEOUT_MS: per-request timeout. (Default: 120000)
 * - SVC_OPENAI_USD_PER_1M_INPUT / SVC_OPENAI_USD_PER_1M_OUTPUT: prices used to report usage in
 *   dollars. (Default: 0)
 *
 * An answer is read up to PROVIDER_ANSWER_LIMIT_BYTES and its usage is made what the kernel
 * takes (./usage.ts), erring on the side of charging.
 */
import { globalRedactor } from '../../log/logger.js';
import { registerSecret } from '../../log/secret-spellings.js';
import { abortReason, delayUnlessAborted, StepError } from '../errors.js';
import { parseRetryAfter, urlHasCredentials, withoutCredentials } from '../http.js';
import type { Usage } from '../types.js';
import type { ChatMessage, Provider, ProviderCall, ProviderRequest, ProviderResponse, ProviderTool } from './provider.js';
import { chargeableTokens, chargeableUsd, MAX_USAGE_TOKENS } from './usage.js';
import { fetchBlockedPortHint, isFetchBlockedPort } from '../../util/fetch-blocked-ports.js';
import { decimalOf } from '../../util/number-text.js';
import { readBodyUpTo } from '../../util/read-body.js';
import { cutText } from '../../encoding/cut-text.js';

export interface OpenAiOptions {
  /** (Default: https://api.openai.com/v1) */
  baseUrl?: string;
  apiKey?: string;
  /** (Default: gpt-4o-mini) */
  model?: string;
  /** (Default: 120000) */
  timeoutMs?: number;
  /** Dollars per million prompt tokens. (Default: 0) */
  usdPer1MInput?: number;
  /** Dollars per million completion tokens. (Default: 0) */
  usdPer1MOutput?: number;
  /** Sampling temperature. (Default: 0) */
  temperature?: number;
  /** Tries after the first for a 429, a 5xx or an unreachable server. (Default: 2) */
  retries?: number;
  /** Wait before the first of those tries, doubling for each next, unless `Retry-After` says otherwise, ms. (Default: 500) */
  retryDelayMs?: number;
  fetch?: typeof fetch;
  /**
   * Told of what the operator should know but that fails nothing: an answer without usage,
   * charged nothing (once per step). `svc worker` logs it as a warning. (Default: none)
   */
  onWarning?: (message: string, fields: Record<string, unknown>) => void;
}

/**
 * Largest answer read from the provider, bytes: the service's body limit (decisions §10). A
 * larger one fails `payload_too_large` as soon as it is past the limit, its body cancelled,
 * instead of being held in memory whole (a 300 MB answer took the worker to 2.7 GB).
 */
export const PROVIDER_ANSWER_LIMIT_BYTES = 1024 * 1024;

/** Steps remembered as already warned about an answer without usage (the oldest forgotten first). */
const WARNED_STEPS_KEPT = 1000;

/** Longest `Retry-After` a provider may ask for before the call fails instead of waiting, ms. */
const MAX_PROVIDER_RETRY_AFTER_MS = 30_000;

/**
 * Options from SVC_OPENAI_* (see the file comment). A value that is set but unusable is an
 * error naming the variable, never a silent default: a price of "xyz" read as 0 would report
 * every call as free and no USD budget would ever be charged. Unset or empty means the default.
 */
export function openAiOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): OpenAiOptions {
  const set = (name: string) => (env[name] === undefined || env[name] === '' ? undefined : env[name]!);
  // The key is a secret from the first moment: an error below must not be able to show it.
  const apiKey = set('SVC_OPENAI_API_KEY');
  if (apiKey !== undefined) registerSecret(globalRedactor, apiKey);
  const price = (name: string) => {
    const v = set(name);
    if (v === undefined) return undefined;
    const n = decimalOf(v); // decimal digits only: not 0x10, 1e3 or Infinity
    if (n === null) throw new Error(`${name} "${v}" must be a non-negative number of dollars`);
    return n;
  };
  const timeout = set('SVC_OPENAI_TIMEOUT_MS');
  if (timeout !== undefined && (!/^\d+$/.test(timeout) || Number(timeout) < 1 || Number(timeout) > 3_600_000)) {
    throw new Error(`SVC_OPENAI_TIMEOUT_MS "${timeout}" must be a whole number of milliseconds from 1 to 3600000`);
  }
  const baseUrl = set('SVC_OPENAI_BASE_URL');
  if (baseUrl !== undefined) {
    let url: URL | null = null;
    try {
      url = new URL(baseUrl);
    } catch {
      /* reported below */
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      // The value is not echoed: a URL may carry a key (user:key@host, ?api-key=).
      throw new Error('SVC_OPENAI_BASE_URL must be an http:// or https:// URL, such as https://api.openai.com/v1');
    }
    // fetch refuses every request to it, and its errors would quote the password into the log
    // and the run's events. Not echoed either.
    if (urlHasCredentials(url.href)) throw new Error('SVC_OPENAI_BASE_URL must not carry a user name or password (user:password@host); put the key in SVC_OPENAI_API_KEY');
    // fetch would refuse it on every request, and each model step would fail as a network error.
    if (isFetchBlockedPort(Number(url.port))) throw new Error(`SVC_OPENAI_BASE_URL is refused: ${fetchBlockedPortHint(url.href)}`);
  }
  return {
    baseUrl,
    apiKey,
    model: set('SVC_OPENAI_MODEL'),
    timeoutMs: timeout === undefined ? undefined : Number(timeout),
    usdPer1MInput: price('SVC_OPENAI_USD_PER_1M_INPUT'),
    usdPer1MOutput: price('SVC_OPENAI_USD_PER_1M_OUTPUT'),
  };
}

/** Function names allow [a-zA-Z0-9_-]{1,64}; tool ids have dots. `billing.refund` → `billing__refund`. */
export function functionName(toolId: string): string {
  const safe = toolId.replace(/\./g, '__').replace(/[^a-zA-Z0-9_-]/g, '_');
  return safe.length <= 64 ? safe : safe.slice(0, 55) + '_' + hash8(toolId);
}

function hash8(s: string): string {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0).toString(16).padStart(8, '0');
}

/** Parses a final answer: a JSON value when the text is one (``` fences allowed), else `{text}`. */
export function parseFinalContent(content: string | null): unknown {
  if (content === null) return null;
  const fenced = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/.exec(content);
  const text = (fenced ? fenced[1]! : content).trim();
  try {
    return JSON.parse(text);
  } catch {
    return { text: content };
  }
}

export class OpenAiProvider implements Provider {
  readonly name = 'openai';
  private readonly opts: Required<Omit<OpenAiOptions, 'apiKey' | 'fetch' | 'onWarning'>> & Pick<OpenAiOptions, 'apiKey' | 'fetch' | 'onWarning'>;
  /** `run_id` NUL `step` of the steps already warned about an answer without usage. */
  private readonly warnedSteps = new Set<string>();

  constructor(opts: OpenAiOptions = {}) {
    if (opts.baseUrl !== undefined && urlHasCredentials(opts.baseUrl)) {
      throw new Error('openai provider: the base URL must not carry a user name or password (user:password@host); pass the key as apiKey');
    }
    this.opts = {
      baseUrl: (opts.baseUrl ?? 'https://api.openai.com/v1').replace(/\/+$/, ''),
      apiKey: opts.apiKey,
      model: opts.model ?? 'gpt-4o-mini',
      timeoutMs: opts.timeoutMs ?? 120_000,
      usdPer1MInput: opts.usdPer1MInput ?? 0,
      usdPer1MOutput: opts.usdPer1MOutput ?? 0,
      temperature: opts.temperature ?? 0,
      retries: opts.retries ?? 2,
      retryDelayMs: opts.retryDelayMs ?? 500,
      fetch: opts.fetch,
      onWarning: opts.onWarning,
    };
    if (opts.apiKey) registerSecret(globalRedactor, opts.apiKey);
  }

  get model(): string {
    return this.opts.model;
  }

  /** The request body sent for `req` (exported for tests and debugging). */
  body(req: ProviderRequest): Record<string, unknown> {
    const body: Record<string, unknown> = {
      model: this.opts.model,
      temperature: this.opts.temperature,
      messages: req.messages.map((m) => toWire(m)),
    };
    if (req.tools.length > 0) {
      body.tools = req.tools.map((t) => toolToWire(t));
      body.tool_choice = 'auto';
    }
    return body;
  }

  /**
   * One model answer. A 429, a 5xx or a server that cannot be reached is asked again, up to
   * `retries` times, waiting as its `Retry-After` says or else `retryDelayMs` doubling; a
   * `Retry-After` over 30 s fails the call at once rather than hold the step. A rate limit or
   * a provider's blip would otherwise spend a step's attempt. A timeout is not asked again (it
   * already waited `timeoutMs`), nor a refusal, nor an answer that broke off (the provider may
   * have billed it). Asking again is safe: a model call changes nothing but the bill.
   */
  async complete(req: ProviderRequest): Promise<ProviderResponse> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.completeOnce(req);
      } catch (err) {
        const wait = err instanceof TransientProviderError ? (err.retryAfterMs ?? this.opts.retryDelayMs * 2 ** attempt) : null;
        if (wait === null || attempt >= this.opts.retries || wait > MAX_PROVIDER_RETRY_AFTER_MS) throw err instanceof TransientProviderError ? err.failure : err;
        await delayUnlessAborted(wait, req.signal);
      }
    }
  }

  private async completeOnce(req: ProviderRequest): Promise<ProviderResponse> {
    const timeout = AbortSignal.timeout(this.opts.timeoutMs);
    const signal = AbortSignal.any([req.signal, timeout]);
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    /** A timeout's failure; an abort rethrown as its reason; null for anything else. */
    const timedOutOrAborted = (): StepError | null => {
      if (req.signal.aborted) throw abortReason(req.signal);
      if (timeout.aborted) return new StepError('provider_error', `model provider did not answer within ${this.opts.timeoutMs} ms`, false);
      return null;
    };
    let res: Response;
    try {
      res = await (this.opts.fetch ?? fetch)(`${this.opts.baseUrl}/chat/completions`, { method: 'POST', headers, body: JSON.stringify(this.body(req)), signal });
    } catch (err) {
      const timedOut = timedOutOrAborted();
      if (timedOut) throw timedOut;
      const cause = (err as { cause?: { code?: string } }).cause;
      // Not reached, or no answer began: another request is safe to send.
      throw new TransientProviderError(new StepError('network_error', withoutCredentials(`cannot reach the model provider at ${this.opts.baseUrl} (${cause?.code ?? (err as Error).message})`), false), null);
    }
    let text: string;
    let whole: boolean;
    try {
      ({ text, whole } = await readCapped(res, PROVIDER_ANSWER_LIMIT_BYTES));
    } catch (err) {
      // The provider answered and may have billed the completion: not sent again.
      throw timedOutOrAborted() ?? new StepError('provider_error', `reading the model provider's answer failed: ${(err as Error).message}`, false);
    }
    // An error answer's first MiB is plenty to quote; a success cut short cannot be used, and
    // the same request would be answered as long again.
    if (!whole && res.status >= 200 && res.status < 300) {
      throw new StepError('payload_too_large', `the model provider's answer is over the ${PROVIDER_ANSWER_LIMIT_BYTES}-byte limit; it was not read further`, true);
    }
    if (res.status < 200 || res.status >= 300) {
      const detail = cutText(globalRedactor.redact(text), 300); // redacted whole, then cut
      if (res.status === 400 || res.status === 404 || res.status === 422) {
        throw new StepError('provider_rejected', `model provider refused the request: HTTP ${res.status} ${detail}`, true);
      }
      const failure = new StepError('provider_error', `model provider failed: HTTP ${res.status} ${detail}`, false);
      if (res.status === 429 || res.status >= 500) throw new TransientProviderError(failure, parseRetryAfter(res.headers.get('retry-after')));
      throw failure;
    }
    let data: any;
    try {
      data = JSON.parse(text);
    } catch {
      throw new StepError('provider_error', 'model provider answered with something that is not JSON', false);
    }
    const message = data?.choices?.[0]?.message;
    if (!message || typeof message !== 'object') throw new StepError('provider_error', 'model provider answered without choices[0].message', false);
    const byName = new Map(req.tools.map((t) => [functionName(t.id), t.id]));
    const calls: ProviderCall[] = [];
    const rawCalls: any[] = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    rawCalls.forEach((c, i) => {
      const name = String(c?.function?.name ?? '');
      let args: Record<string, unknown> = {};
      const rawArgs = c?.function?.arguments;
      if (typeof rawArgs === 'string' && rawArgs.trim() !== '') {
        try {
          const parsed = JSON.parse(rawArgs);
          args = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : { _invalid: rawArgs };
        } catch {
          args = { _invalid: rawArgs };
        }
      } else if (rawArgs && typeof rawArgs === 'object') {
        args = rawArgs as Record<string, unknown>;
      }
      calls.push({ id: typeof c?.id === 'string' ? c.id : `call_${i}`, tool: byName.get(name) ?? name, args });
    });
    let usage = answerUsage(data.usage, this.opts.usdPer1MInput, this.opts.usdPer1MOutput);
    if (usage === null) {
      usage = { tokens: 0, usd: 0 };
      this.warnNoUsage(req, typeof data.model === 'string' ? data.model : this.opts.model);
    }
    const content = typeof message.content === 'string' ? message.content : null;
    const response: ProviderResponse = { content, calls, usage, model: typeof data.model === 'string' ? data.model : this.opts.model };
    if (calls.length === 0) response.output = parseFinalContent(content);
    return response;
  }

  /** Warns, once per step, that an answer said nothing of its usage and so was charged nothing. */
  private warnNoUsage(req: ProviderRequest, model: string): void {
    const key = `${req.run_id}\u0000${req.step}`;
    if (!this.opts.onWarning || this.warnedSteps.has(key)) return;
    this.warnedSteps.add(key);
    if (this.warnedSteps.size > WARNED_STEPS_KEPT) this.warnedSteps.delete(this.warnedSteps.values().next().value!);
    this.opts.onWarning("the model provider's answer has no usage; the call is charged 0 tokens and 0 USD", {
      provider_url: withoutCredentials(this.opts.baseUrl),
      model,
      run_id: req.run_id,
      step: req.step,
    });
  }
}

/**
 * An answer's usage as the kernel takes it (chargeableTokens, chargeableUsd): a count that is
 * there but not a finite non-negative number counts as the kernel's maximum, so the run fails
 * `budget_exhausted` rather than go uncharged. Null when the answer states no count at all.
 */
export function answerUsage(raw: unknown, usdPer1MInput: number, usdPer1MOutput: number): Usage | null {
  if (raw === undefined || raw === null) return null;
  const u: Record<string, unknown> = raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? (raw as Record<string, unknown>) : { total_tokens: raw };
  const given = (v: unknown) => v !== undefined && v !== null;
  if (!given(u.prompt_tokens) && !given(u.completion_tokens) && !given(u.total_tokens)) return null;
  const count = (v: unknown) => (given(v) ? chargeableTokens(v) : 0);
  const prompt = count(u.prompt_tokens);
  const completion = count(u.completion_tokens);
  const tokens = Math.min(MAX_USAGE_TOKENS, Math.max(count(u.total_tokens), prompt + completion));
  // 0 × a price is 0 (not NaN for an unbounded price); anything else past the bound is the bound.
  const cost = (n: number, perMillion: number) => (n === 0 || perMillion === 0 ? 0 : (n * perMillion) / 1e6);
  return { tokens, usd: chargeableUsd(cost(prompt, usdPer1MInput) + cost(completion, usdPer1MOutput)) };
}

/** The body of `res` as text, read up to `limit` bytes (`whole` false when it is longer). */
async function readCapped(res: Response, limit: number): Promise<{ text: string; whole: boolean }> {
  const { bytes, whole } = await readBodyUpTo(res, limit);
  return { text: new TextDecoder().decode(bytes), whole };
}

function toWire(m: ChatMessage): Record<string, unknown> {
  switch (m.role) {
    case 'system':
    case 'user':
      return { role: m.role, content: m.content };
    case 'assistant': {
      const out: Record<string, unknown> = { role: 'assistant', content: m.content };
      if (m.calls.length > 0) {
        out.tool_calls = m.calls.map((c) => ({ id: c.id, type: 'function', function: { name: functionName(c.tool), arguments: JSON.stringify(c.args) } }));
      }
      return out;
    }
    case 'tool':
      return { role: 'tool', tool_call_id: m.call_id, content: m.content };
  }
}

function toolToWire(t: ProviderTool): Record<string, unknown> {
  const schema = t.input_schema && typeof t.input_schema === 'object' && Object.keys(t.input_schema).length > 0 ? t.input_schema : { type: 'object', properties: {} };
  const description = (t.description || t.id) + (t.writes ? ' (changes a system: proposed to policy and may need approval)' : '');
  return { type: 'function', function: { name: functionName(t.id), description, parameters: schema } };
}

/** A failure another try may cure, with the wait the provider asked for (null: none said). */
class TransientProviderError extends Error {
  constructor(
    readonly failure: StepError,
    readonly retryAfterMs: number | null,
  ) {
    super(failure.message);
  }
}

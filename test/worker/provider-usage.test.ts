// Provider usage as the kernel takes it (svc-worker(1) FAILURES budget_exhausted, ENVIRONMENT
// SVC_OPENAI_USD_PER_1M_*; decisions §8; interface 4.1 complete/fail `usage`): whatever an
// OpenAI-compatible server says its usage was, the worker reports whole, bounded numbers the
// kernel accepts, erring on the side of charging, so absurd usage fails the run
// budget_exhausted instead of a 400 that charges nothing; an answer without usage is charged 0
// with a warning once per step.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KernelClient } from '../../src/worker/kernel-client.js';
import { OpenAiProvider } from '../../src/worker/providers/openai.js';
import type { ProviderRequest } from '../../src/worker/providers/provider.js';
import { MAX_USAGE_TOKENS, MAX_USAGE_USD } from '../../src/worker/providers/usage.js';
import { MAX_SPEND_USD } from '../../src/spend.js';
import { Worker } from '../../src/worker/worker.js';
import { FakeGateway, FakeKernel, until } from './fakes.js';
import { getRun, pushBundle, refundsBundle, startRun, startRunDaemon } from '../integration/run-fixtures.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

/** A chat-completions server answering every request with `usage` written as raw JSON text (so 1e400 stays 1e400 on the wire). */
async function rawUsageServer(usageJson: () => string | null, content = '{"amount": 1}'): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const u = usageJson();
      const body = `{"id":"c1","model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(content)}}}]${u === null ? '' : `,"usage":${u}`}}`;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

function req(over: Partial<ProviderRequest> = {}): ProviderRequest {
  return { run_id: 'run_1', step: 'triage', turn: 0, messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal, ...over };
}

describe('provider usage is what the kernel accepts, erring on the side of charging (svc-worker(1) FAILURES budget_exhausted)', () => {
  it.each([
    ['a fraction rounds up', '{"prompt_tokens":10.5,"completion_tokens":1}', 12],
    ['total_tokens counts when it is the larger', '{"prompt_tokens":3,"completion_tokens":4,"total_tokens":9.2}', 10],
    ['past the kernel maximum is the maximum', '{"prompt_tokens":1e20}', MAX_USAGE_TOKENS],
    ['1e400 (Infinity once parsed) is the maximum', '{"prompt_tokens":1e400}', MAX_USAGE_TOKENS],
    ['a negative count is the maximum, not 0', '{"prompt_tokens":-5,"completion_tokens":2}', MAX_USAGE_TOKENS],
    ['a count that is not a number is the maximum', '{"prompt_tokens":"lots"}', MAX_USAGE_TOKENS],
    ['a count written as a decimal string (some proxies) is its number', '{"prompt_tokens":"12","completion_tokens":" 3 "}', 15],
    ['two counts that add up past the maximum are the maximum', `{"prompt_tokens":${MAX_USAGE_TOKENS},"completion_tokens":${MAX_USAGE_TOKENS}}`, MAX_USAGE_TOKENS],
  ])('%s', async (_what, usage, tokens) => {
    const baseUrl = await rawUsageServer(() => usage);
    const r = await new OpenAiProvider({ baseUrl, retries: 0 }).complete(req());
    expect(r.usage.tokens).toBe(tokens);
    expect(Number.isSafeInteger(r.usage.tokens)).toBe(true);
  });

  it('dollars are computed from the bounded counts and bounded likewise', async () => {
    const baseUrl = await rawUsageServer(() => '{"prompt_tokens":1e400,"completion_tokens":2000000}');
    const huge = await new OpenAiProvider({ baseUrl, retries: 0, usdPer1MInput: 5, usdPer1MOutput: 0.5 }).complete(req());
    // The maximum's tokens at 5 USD a million: past any remit's spend (at most 1e9 USD), within the kernel's bound.
    expect(huge.usage.tokens).toBe(MAX_USAGE_TOKENS);
    expect(huge.usage.usd).toBeGreaterThan(MAX_SPEND_USD);
    expect(huge.usage.usd).toBeLessThanOrEqual(MAX_USAGE_USD);
    // A price that takes them past the kernel's bound is the bound.
    const dear = await new OpenAiProvider({ baseUrl, retries: 0, usdPer1MInput: 1e6 }).complete(req());
    expect(dear.usage).toEqual({ tokens: MAX_USAGE_TOKENS, usd: MAX_USAGE_USD });
    // An ordinary answer costs what its prices say.
    const plain = await rawUsageServer(() => '{"prompt_tokens":1000,"completion_tokens":2000000}');
    expect((await new OpenAiProvider({ baseUrl: plain, retries: 0, usdPer1MInput: 5, usdPer1MOutput: 0.5 }).complete(req())).usage).toEqual({ tokens: 2_001_000, usd: 1.005 });
  });

  it('an answer without usage is charged 0, with a warning once per step naming the provider (svc-worker(1) ENVIRONMENT)', async () => {
    const baseUrl = await rawUsageServer(() => null);
    const warnings: Array<{ message: string; fields: Record<string, unknown> }> = [];
    const p = new OpenAiProvider({ baseUrl, retries: 0, onWarning: (message, fields) => warnings.push({ message, fields }) });
    expect((await p.complete(req())).usage).toEqual({ tokens: 0, usd: 0 });
    await p.complete(req({ turn: 1 }));
    expect(warnings).toEqual([
      { message: "the model provider's answer has no usage; the call is charged 0 tokens and 0 USD", fields: { provider_url: baseUrl, model: 'fake-model', run_id: 'run_1', step: 'triage' } },
    ]);
    await p.complete(req({ step: 'summarise' }));
    expect(warnings.map((w) => w.fields.step)).toEqual(['triage', 'summarise']);
    // `usage: {}` states no count either; a usage with counts warns of nothing.
    const empty = await rawUsageServer(() => '{}');
    const seen: string[] = [];
    await new OpenAiProvider({ baseUrl: empty, retries: 0, onWarning: (m) => seen.push(m) }).complete(req());
    expect(seen).toHaveLength(1);
    const counted = await rawUsageServer(() => '{"prompt_tokens":0,"completion_tokens":0}');
    await new OpenAiProvider({ baseUrl: counted, retries: 0, onWarning: (m) => seen.push(m) }).complete(req());
    expect(seen).toHaveLength(1);
  });
});

describe('complete and fail send usage the kernel accepts (interface 4.1; the sums of several answers too)', () => {
  it('rounds fractions up and bounds tokens and dollars at the kernel maximum', async () => {
    await using kernel = await new FakeKernel().start();
    const k = new KernelClient({ baseUrl: kernel.url });
    await k.complete('lse_a', { ok: 1 }, { tokens: 10.5, usd: 0.25 }).catch(() => null);
    await k.fail('lse_b', { code: 'budget_exhausted', message: 'x' }, true, { tokens: 2 * MAX_USAGE_TOKENS, usd: 3e12 }).catch(() => null);
    await k.fail('lse_c', { code: 'budget_exhausted', message: 'x' }, true, { tokens: Infinity, usd: Number.NaN }).catch(() => null);
    expect(kernel.calls('POST', '/v1/leases/lse_a/complete')[0]!.body.usage).toEqual({ tokens: 11, usd: 0.25 });
    expect(kernel.calls('POST', '/v1/leases/lse_b/fail')[0]!.body.usage).toEqual({ tokens: MAX_USAGE_TOKENS, usd: MAX_USAGE_USD });
    expect(kernel.calls('POST', '/v1/leases/lse_c/fail')[0]!.body.usage).toEqual({ tokens: MAX_USAGE_TOKENS, usd: MAX_USAGE_USD });
  });
});

describe('against the real kernel: absurd usage fails the run budget_exhausted, a fraction is charged (decisions §8)', () => {
  async function runTriage(usage: string) {
    const d = await startRunDaemon();
    cleanups.push(async () => d[Symbol.asyncDispose]());
    const gateway = await new FakeGateway().start();
    cleanups.push(() => gateway.close());
    gateway.define('billing.lookup', () => ({ rows: [] }));
    const baseUrl = await rawUsageServer(() => usage);
    const { run_id } = await startRun(d, await pushBundle(d, refundsBundle()), { spend: { tokens: 100_000, usd: 5 } });
    const worker = new Worker({ kernelUrl: d.kernelUrl!, gatewayUrl: gateway.url, provider: new OpenAiProvider({ baseUrl, retries: 0 }), kinds: ['model'], waitSeconds: 1 });
    const reported: any[] = [];
    worker.on('step:done', (e) => reported.push(e));
    worker.on('step:error', (e) => reported.push(e));
    cleanups.push(() => worker.stop({ graceMs: 0 }));
    worker.start();
    await until(() => reported.length > 0, 10_000, 'the step report');
    return { d, run_id, reported };
  }

  it('1e400 tokens: the worker says budget_exhausted and the kernel fails the run with it, charged', async () => {
    const { d, run_id, reported } = await runTriage('{"prompt_tokens":1e400}');
    expect(reported[0]).toMatchObject({ error: { code: 'budget_exhausted' }, outcome: 'quarantined', run_state: 'failed' });
    expect(await getRun(d, run_id)).toMatchObject({ state: 'failed', error: { code: 'budget_exhausted' }, usage: { tokens: MAX_USAGE_TOKENS } });
  });

  it('10.5 tokens: the step completes and 11 are charged', async () => {
    const { d, run_id, reported } = await runTriage('{"prompt_tokens":10.5}');
    expect(reported[0]).toMatchObject({ run_state: 'running', usage: { tokens: 11 } });
    expect(await getRun(d, run_id)).toMatchObject({ state: 'running', usage: { tokens: 11, usd: 0 } });
  });
});

// Model providers of the worker: the mock script player (decisions §4 `mock`) and the
// OpenAI-compatible chat-completions provider against a local fake server that records what it
// was sent; plus the agent loop over it behind the data boundary (interface 5.5).
import { afterEach, describe, expect, it } from 'vitest';
import { globalRedactor } from '../../src/log/logger.js';
import { StepError } from '../../src/worker/errors.js';
import { MockProvider, mockPhases } from '../../src/worker/providers/mock.js';
import { parseRetryAfter } from '../../src/worker/http.js';
import { functionName, OpenAiProvider, openAiOptionsFromEnv, parseFinalContent } from '../../src/worker/providers/openai.js';
import type { ProviderRequest } from '../../src/worker/providers/provider.js';
import { Worker } from '../../src/worker/worker.js';
import { chatAnswer, FakeGateway, FakeKernel, FakeOpenAi, makeLease, until } from './fakes.js';
import { closedPortUrl } from '../helpers/daemon.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function req(over: Partial<ProviderRequest> = {}): ProviderRequest {
  return { run_id: 'run_1', step: 'triage', turn: 0, messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal, ...over };
}

describe('mock provider (D §4 mock scripts)', () => {
  const script = {
    tool_calls: [{ tool: 'billing.lookup_invoice', args: { invoice_id: 'INV-1' } }],
    actions: [{ tool: 'billing.refund', args: { amount: 5 }, summary: 'Refund 5' }],
    output: { category: 'refund' },
    usage: { tokens: 30, usd: 0.5 },
  };

  it('plays tool calls, then actions, then the output; usage on the first answer only', async () => {
    const p = new MockProvider();
    const a0 = await p.complete(req({ turn: 0, mock: script }));
    expect(a0.calls).toEqual([{ id: 'mock_t0', tool: 'billing.lookup_invoice', args: { invoice_id: 'INV-1' } }]);
    expect(a0.usage).toEqual({ tokens: 30, usd: 0.5 });
    const a1 = await p.complete(req({ turn: 1, mock: script }));
    expect(a1.calls).toEqual([{ id: 'mock_a0', tool: 'billing.refund', args: { amount: 5 }, action: true, summary: 'Refund 5' }]);
    expect(a1.usage).toEqual({ tokens: 0, usd: 0 });
    const a2 = await p.complete(req({ turn: 2, mock: script }));
    expect(a2).toMatchObject({ calls: [], output: { category: 'refund' }, content: '{"category":"refund"}' });
    // Past the end it keeps answering the output (the loop stops there anyway).
    expect((await p.complete(req({ turn: 7, mock: script }))).output).toEqual({ category: 'refund' });
  });

  it('skips empty phases', () => {
    expect(mockPhases({ output: 1 })).toEqual([{ calls: [], output: 1 }]);
    expect(mockPhases({ actions: [{ tool: 'a.b' }] }).map((p) => p.calls.length)).toEqual([1, 0]);
  });

  it('a missing script or a call without a tool is a deterministic error', async () => {
    const p = new MockProvider();
    await expect(p.complete(req())).rejects.toMatchObject({ code: 'mock_script_missing', deterministic: true });
    await expect(p.complete(req({ mock: { tool_calls: [{ args: {} } as never] } }))).rejects.toBeInstanceOf(StepError);
  });
});

describe('mock provider: text, delay_ms and error (svc-bundle(5) mock; D §6 failures)', () => {
  it('text is the assistant text of every answer; the output stays the step output', async () => {
    const p = new MockProvider();
    const s = { tool_calls: [{ tool: 'a.b' }], output: { ok: true }, text: 'Looking it up.' };
    expect(await p.complete(req({ turn: 0, mock: s }))).toMatchObject({ content: 'Looking it up.', calls: [{ tool: 'a.b' }] });
    expect(await p.complete(req({ turn: 1, mock: s }))).toMatchObject({ content: 'Looking it up.', calls: [], output: { ok: true } });
  });

  it('error fails the first answer on every attempt, with its code, message and deterministic flag', async () => {
    const p = new MockProvider();
    await expect(p.complete(req({ mock: { output: 1, error: { code: 'provider_error', message: 'upstream 503' } } }))).rejects.toMatchObject({
      code: 'provider_error',
      message: 'upstream 503',
      deterministic: false,
    });
    // A known code keeps its own flag unless the script says otherwise; an unknown one is retryable.
    await expect(p.complete(req({ mock: { error: { code: 'output_invalid' } } }))).rejects.toMatchObject({ code: 'output_invalid', deterministic: true, message: 'the mock script of step triage fails with output_invalid' });
    await expect(p.complete(req({ mock: { error: { code: 'output_invalid', deterministic: false } } }))).rejects.toMatchObject({ deterministic: false });
    await expect(p.complete(req({ mock: { error: { code: 'rate_limited' } } }))).rejects.toMatchObject({ code: 'rate_limited', deterministic: false });
    // Later turns (a step resumed after a park replays the first) answer normally.
    expect((await p.complete(req({ turn: 1, mock: { output: 1, error: { code: 'provider_error' } } }))).output).toBe(1);
  });

  it('delay_ms is waited before an answer, and the step abort cuts it short with its reason', async () => {
    const p = new MockProvider();
    const t0 = performance.now();
    await p.complete(req({ mock: { output: 1, delay_ms: 150 } }));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(140);
    const ac = new AbortController();
    const t1 = performance.now();
    setTimeout(() => ac.abort(new StepError('step_timeout', 'too slow')), 50);
    await expect(p.complete(req({ mock: { output: 1, delay_ms: 60_000 }, signal: ac.signal }))).rejects.toMatchObject({ code: 'step_timeout' });
    expect(performance.now() - t1).toBeLessThan(5_000);
  });
});

describe('OpenAI-compatible provider (fake chat-completions server)', () => {
  it('reads SVC_OPENAI_* from the environment', () => {
    expect(openAiOptionsFromEnv({ SVC_OPENAI_BASE_URL: 'http://x/v1', SVC_OPENAI_API_KEY: 'sk-1', SVC_OPENAI_MODEL: 'm', SVC_OPENAI_USD_PER_1M_INPUT: '2.5', SVC_OPENAI_TIMEOUT_MS: '' })).toEqual({
      baseUrl: 'http://x/v1',
      apiKey: 'sk-1',
      model: 'm',
      timeoutMs: undefined,
      usdPer1MInput: 2.5,
      usdPer1MOutput: undefined,
    });
    expect(openAiOptionsFromEnv({ SVC_OPENAI_TIMEOUT_MS: '5000', SVC_OPENAI_USD_PER_1M_OUTPUT: '0' })).toMatchObject({ timeoutMs: 5000, usdPer1MOutput: 0 });
    for (const [name, value] of [['SVC_OPENAI_TIMEOUT_MS', '0'], ['SVC_OPENAI_TIMEOUT_MS', '1.5'], ['SVC_OPENAI_USD_PER_1M_INPUT', 'Infinity'], ['SVC_OPENAI_BASE_URL', 'ftp://x/v1'], ['SVC_OPENAI_BASE_URL', 'http://127.0.0.1:6000/v1']] as const) {
      expect(() => openAiOptionsFromEnv({ [name]: value }), `${name}=${value}`).toThrow(new RegExp(`^${name} `));
    }
  });

  it('maps tool ids to function names and back', () => {
    expect(functionName('billing.lookup_invoice')).toBe('billing__lookup_invoice');
    expect(functionName('mcp-fs.read file')).toBe('mcp-fs__read_file');
    expect(functionName('a.' + 'x'.repeat(80))).toHaveLength(64);
  });

  it('parses final content as JSON (fenced too), else wraps the text', () => {
    expect(parseFinalContent('{"a":1}')).toEqual({ a: 1 });
    expect(parseFinalContent('```json\n{"a":2}\n```')).toEqual({ a: 2 });
    expect(parseFinalContent('plain words')).toEqual({ text: 'plain words' });
  });

  it('sends model, messages, tools and the key; maps tool calls and usage back', async () => {
    const server = await new FakeOpenAi(() => chatAnswer({ toolCalls: [{ id: 'call_1', name: 'billing__lookup_invoice', args: { invoice_id: 'INV-1' } }], prompt: 1000, completion: 500 })).start();
    cleanups.push(() => server.close());
    const p = new OpenAiProvider({ baseUrl: `${server.url}/v1`, apiKey: 'sk-test-secret-123', model: 'gpt-test', usdPer1MInput: 2, usdPer1MOutput: 8 });
    const r = await p.complete(
      req({
        messages: [
          { role: 'system', content: 'sys' },
          { role: 'user', content: 'Ticket' },
          { role: 'assistant', content: null, calls: [{ id: 'c0', tool: 'billing.lookup_invoice', args: { a: 1 } }] },
          { role: 'tool', call_id: 'c0', tool: 'billing.lookup_invoice', content: '{"rows":[]}' },
        ],
        tools: [{ id: 'billing.lookup_invoice', description: 'Find an invoice', input_schema: { type: 'object', properties: { invoice_id: { type: 'string' } } }, writes: false }],
      }),
    );
    expect(r.calls).toEqual([{ id: 'call_1', tool: 'billing.lookup_invoice', args: { invoice_id: 'INV-1' } }]);
    expect(r.usage).toEqual({ tokens: 1500, usd: 0.006 });
    expect(r.model).toBe('fake-model');
    const sent = server.requests[0]!;
    expect(sent.headers.authorization).toBe('Bearer sk-test-secret-123');
    expect(sent.body).toEqual({
      model: 'gpt-test',
      temperature: 0,
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'Ticket' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c0', type: 'function', function: { name: 'billing__lookup_invoice', arguments: '{"a":1}' } }] },
        { role: 'tool', tool_call_id: 'c0', content: '{"rows":[]}' },
      ],
      tools: [{ type: 'function', function: { name: 'billing__lookup_invoice', description: 'Find an invoice', parameters: { type: 'object', properties: { invoice_id: { type: 'string' } } } } }],
      tool_choice: 'auto',
    });
    // The key is registered with the log redactor.
    expect(globalRedactor.redact('key sk-test-secret-123')).toBe('key [REDACTED]');
  });

  it('a final answer carries the parsed output', async () => {
    const server = await new FakeOpenAi(() => chatAnswer({ content: '{"category":"refund"}' })).start();
    cleanups.push(() => server.close());
    const r = await new OpenAiProvider({ baseUrl: `${server.url}/v1` }).complete(req());
    expect(r).toMatchObject({ calls: [], output: { category: 'refund' } });
    expect(server.requests[0]!.headers.authorization).toBeUndefined();
    expect(server.requests[0]!.body.tools).toBeUndefined();
  });

  it.each([
    [400, 'provider_rejected', true, 1],
    [422, 'provider_rejected', true, 1],
    [401, 'provider_error', false, 1],
    [429, 'provider_error', false, 3],
    [500, 'provider_error', false, 3],
  ])('HTTP %i → %s (deterministic %s) after %i request(s)', async (status, code, deterministic, requests) => {
    const server = await new FakeOpenAi(() => ({ status, body: { error: { message: 'nope' } } })).start();
    cleanups.push(() => server.close());
    await expect(new OpenAiProvider({ baseUrl: `${server.url}/v1`, retryDelayMs: 1 }).complete(req())).rejects.toMatchObject({ code, deterministic });
    expect(server.requests).toHaveLength(requests); // a rate limit or a 5xx is asked twice more
  });

  it("a rate limit or a provider's blip is asked again, waiting as Retry-After says; a wait over 30 s is not waited", async () => {
    const server = await new FakeOpenAi((_body, n) =>
      n === 0 ? { status: 429, body: { error: { message: 'slow down' } }, headers: { 'retry-after': '0.3' } } : n === 1 ? { status: 503, body: {} } : chatAnswer({ content: '{"ok":true}' }),
    ).start();
    cleanups.push(() => server.close());
    const started = Date.now();
    expect((await new OpenAiProvider({ baseUrl: `${server.url}/v1`, retryDelayMs: 1 }).complete(req())).output).toEqual({ ok: true });
    expect(server.requests).toHaveLength(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    const patient = await new FakeOpenAi(() => ({ status: 429, body: {}, headers: { 'retry-after': '3600' } })).start();
    cleanups.push(() => patient.close());
    await expect(new OpenAiProvider({ baseUrl: `${patient.url}/v1` }).complete(req())).rejects.toMatchObject({ code: 'provider_error' });
    expect(patient.requests).toHaveLength(1);
  });

  it('reads Retry-After as seconds or an HTTP date, and nothing else', () => {
    const now = Date.parse('2026-11-28T07:00:00.000Z');
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter(' 0.5 ', now)).toBe(500);
    expect(parseRetryAfter('Sat, 28 Nov 2026 07:00:01 GMT', now)).toBe(1000);
    expect(parseRetryAfter('Sat, 28 Nov 2026 06:59:00 GMT', now)).toBe(0);
    for (const odd of [null, '', '-1', '1,5', '1 2', '0x10', 'soon', '2026-11-28']) expect(parseRetryAfter(odd, now), String(odd)).toBeNull();
  });

  it('a wait for Retry-After ends when the step is stopped; an answer that broke off is not asked again', async () => {
    const patient = await new FakeOpenAi(() => ({ status: 429, body: {}, headers: { 'retry-after': '20' } })).start();
    cleanups.push(() => patient.close());
    const ac = new AbortController();
    setTimeout(() => ac.abort(new StepError('step_timeout', 'too slow')), 150);
    const started = Date.now();
    await expect(new OpenAiProvider({ baseUrl: `${patient.url}/v1` }).complete(req({ signal: ac.signal }))).rejects.toMatchObject({ code: 'step_timeout' });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(patient.requests).toHaveLength(1);
    let sent = 0;
    const brokenBody: typeof fetch = async () => {
      sent += 1;
      return new Response(new ReadableStream({ start: (c) => c.error(new Error('socket hang up')) }), { status: 200 });
    };
    await expect(new OpenAiProvider({ baseUrl: 'http://provider.invalid/v1', fetch: brokenBody, retryDelayMs: 1 }).complete(req())).rejects.toMatchObject({ code: 'provider_error', deterministic: false });
    expect(sent).toBe(1); // it may have been billed
  });

  it('an unreachable server is a network_error after three tries and a slow one a provider_error timeout after one', async () => {
    let tries = 0;
    const refusing: typeof fetch = async () => {
      tries += 1;
      throw Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    };
    await expect(new OpenAiProvider({ baseUrl: 'http://provider.invalid/v1', fetch: refusing, retryDelayMs: 1 }).complete(req())).rejects.toMatchObject({ code: 'network_error', deterministic: false });
    expect(tries).toBe(3);
    await expect(new OpenAiProvider({ baseUrl: `${await closedPortUrl()}/v1`, retryDelayMs: 1 }).complete(req())).rejects.toMatchObject({ code: 'network_error', deterministic: false });
    const slow = await new FakeOpenAi(() => new Promise(() => {}) as never).start();
    cleanups.push(() => slow.close());
    await expect(new OpenAiProvider({ baseUrl: `${slow.url}/v1`, timeoutMs: 200 }).complete(req())).rejects.toMatchObject({ code: 'provider_error', deterministic: false });
    expect(slow.requests).toHaveLength(1); // a timeout already waited its whole time
  });
});

describe('agent loop over the OpenAI provider behind the data boundary (I 5.5)', () => {
  it('the provider never receives an ungranted email from a tool result; a note records it', async () => {
    const kernel = await new FakeKernel().start();
    const gateway = await new FakeGateway().start();
    const openai = await new FakeOpenAi((body, n) => {
      if (n === 0) return chatAnswer({ toolCalls: [{ id: 'call_a', name: 'billing__lookup_invoice', args: { invoice_id: 'INV-3' } }] });
      // The model sees the redacted row and answers with what it knows.
      const toolMsg = body.messages.find((m: any) => m.role === 'tool');
      const row = JSON.parse(toolMsg.content).rows[0];
      return chatAnswer({ content: JSON.stringify({ category: 'refund', contact: row.email, amount: row.amount }) });
    }).start();
    gateway.define('billing.lookup_invoice', (a) => ({ rows: [{ invoice_id: a.invoice_id, amount: 80, email: 'sam.lee@example.org' }] }), { description: 'Find an invoice', data_classes: { email: 'pii' } });
    const worker = new Worker({ kernelUrl: kernel.url, gatewayUrl: gateway.url, provider: new OpenAiProvider({ baseUrl: `${openai.url}/v1`, model: 'gpt-test' }), waitSeconds: 1 });
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await Promise.all([kernel.close(), gateway.close(), openai.close()]);
    });
    const done: string[] = [];
    worker.on('step:done', (e) => done.push(e.lease_id));
    worker.on('step:error', (e) => done.push(`error:${e.error.code}:${e.error.message}`));
    worker.start();
    const lease = makeLease(
      { step: 'triage', step_def: { id: 'triage', kind: 'model', prompt: 'triage', tools: ['billing.lookup_invoice'], output_schema: { type: 'object' } } },
      { input: { invoice_id: 'INV-3' }, prompts: { triage: 'Look at invoice {{input.invoice_id}}' } },
    );
    kernel.offer(lease);
    await until(() => done.length > 0);
    expect(done).toEqual([lease.lease_id]);
    expect(openai.requests).toHaveLength(2);
    expect(openai.sentText()).not.toContain('sam.lee@example.org');
    expect(openai.sentText()).toContain('[REDACTED:pii]');
    // The prompt and the offered tool reached the provider.
    expect(openai.requests[0]!.body.messages[1]).toEqual({ role: 'user', content: 'Look at invoice "INV-3"' });
    expect(openai.requests[0]!.body.tools[0].function.name).toBe('billing__lookup_invoice');
    expect(kernel.eventsOf(lease.run_id, 'note').map((e) => e.payload)).toEqual([
      { type: 'redaction', class: 'pii', path: '/calls/1/result/rows/0/email', count: 1, source: 'worker', step: 'triage', call_index: 2 },
    ]);
    const complete = kernel.calls('POST', `/v1/leases/${lease.lease_id}/complete`)[0]!;
    expect(complete.body).toEqual({ output: { category: 'refund', contact: '[REDACTED:pii]', amount: 80 }, usage: { tokens: 30, usd: 0 } });
  });

  it('a call of a tool the step does not offer is answered to the model, not executed', async () => {
    const kernel = await new FakeKernel().start();
    const gateway = await new FakeGateway().start();
    const openai = await new FakeOpenAi((_b, n) =>
      n === 0 ? chatAnswer({ toolCalls: [{ id: 'c1', name: 'billing__secret_dump', args: {} }] }) : chatAnswer({ content: '{"done":true}' }),
    ).start();
    gateway.define('billing.lookup_invoice', () => ({}));
    gateway.define('billing.secret_dump', () => ({ all: 'data' }));
    const worker = new Worker({ kernelUrl: kernel.url, gatewayUrl: gateway.url, provider: new OpenAiProvider({ baseUrl: `${openai.url}/v1` }), waitSeconds: 1 });
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await Promise.all([kernel.close(), gateway.close(), openai.close()]);
    });
    let ended = false;
    worker.on('step:done', () => (ended = true));
    worker.start();
    kernel.offer(makeLease({ step: 'triage', step_def: { id: 'triage', kind: 'model', prompt: 'p', tools: ['billing.lookup_invoice'] } }, { prompts: { p: 'go' } }));
    await until(() => ended);
    expect(gateway.executions.get('billing.secret_dump') ?? 0).toBe(0);
    const second = openai.requests[1]!.body.messages.at(-1);
    expect(second).toMatchObject({ role: 'tool', tool_call_id: 'c1' });
    expect(JSON.parse(second.content).error.code).toBe('tool_not_offered');
  });
});

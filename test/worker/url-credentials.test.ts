// URLs with a user name or password (svc-worker(1) ENVIRONMENT: "a variable that is set but
// cannot be used … is a usage error naming it, checked before the worker starts"; EXIT STATUS
// 2). fetch refuses every request to such a URL, so the worker refuses it up front, naming the
// option or variable and never the password; and no log line or step failure (which the kernel
// keeps for good in step.failed) may quote a URL's password.
import { afterEach, describe, expect, it } from 'vitest';
import { StepError } from '../../src/worker/errors.js';
import { requestJson, UnreachableError, urlHasCredentials, withoutCredentials } from '../../src/worker/http.js';
import { MockProvider } from '../../src/worker/providers/mock.js';
import { OpenAiProvider, openAiOptionsFromEnv } from '../../src/worker/providers/openai.js';
import type { Provider } from '../../src/worker/providers/provider.js';
import { Worker } from '../../src/worker/worker.js';
import { NO_DAEMON, runSvc } from '../helpers/cli.js';
import { FakeGateway, FakeKernel, makeLease, until } from './fakes.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

const SECRET = 'hunter2-pw';

describe('svc worker refuses a URL with credentials before it starts (svc-worker(1) ENVIRONMENT, EXIT STATUS)', () => {
  it.each([
    [['--kernel-url', `http://ops:${SECRET}@127.0.0.1:7401`], {}, '--kernel-url'],
    [['--gateway-url', `http://ops:${SECRET}@127.0.0.1:7402`], {}, '--gateway-url'],
    [[], { SVC_KERNEL_URL: `http://ops:${SECRET}@127.0.0.1:7401` }, 'SVC_KERNEL_URL'],
    [[], { SVC_GATEWAY_URL: `https://${SECRET}@gw.example` }, 'SVC_GATEWAY_URL'],
    // A port fetch refuses, whose own message quotes the address: the credentials are refused first.
    [['--kernel-url', `http://ops:${SECRET}@127.0.0.1:1`], {}, '--kernel-url'],
  ] as Array<[string[], Record<string, string>, string]>)('%j %j exits 2 naming %s, not the password', async (args, env, source) => {
    const r = await runSvc([...args, 'worker'], env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(`svc: ${source} must not carry a user name or password (user:password@host); pass the token with --token or SVC_TOKEN`);
    expect(r.stderr).not.toContain(SECRET);
  });

  it('SVC_OPENAI_BASE_URL with credentials exits 2 naming it, not the password', async () => {
    const r = await runSvc(['--kernel-url', NO_DAEMON, 'worker', '--provider', 'openai'], { SVC_OPENAI_BASE_URL: `http://u:${SECRET}@127.0.0.1:8000/v1` });
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe('svc: SVC_OPENAI_BASE_URL must not carry a user name or password (user:password@host); put the key in SVC_OPENAI_API_KEY');
  });

  it('the library refuses them too: the provider options, the provider and the worker', () => {
    expect(() => openAiOptionsFromEnv({ SVC_OPENAI_BASE_URL: `http://u:${SECRET}@host/v1` })).toThrow(/^SVC_OPENAI_BASE_URL must not carry a user name or password/);
    expect(() => openAiOptionsFromEnv({ SVC_OPENAI_BASE_URL: `http://${SECRET}@host/v1` })).toThrow(/^SVC_OPENAI_BASE_URL must not/);
    expect(() => new OpenAiProvider({ baseUrl: `http://u:${SECRET}@host/v1` })).toThrow(/must not carry a user name or password/);
    expect(() => new Worker({ kernelUrl: `http://u:${SECRET}@127.0.0.1:7401`, gatewayUrl: 'http://127.0.0.1:7402', provider: new MockProvider() })).toThrow(
      'worker: the kernel URL must not carry a user name or password (user:password@host); the token is sent as a bearer header',
    );
    expect(() => new Worker({ kernelUrl: 'http://127.0.0.1:7401', gatewayUrl: `http://u:${SECRET}@127.0.0.1:7402`, provider: new MockProvider() })).toThrow(/^worker: the gateway URL must not/);
    for (const f of [
      () => openAiOptionsFromEnv({ SVC_OPENAI_BASE_URL: `http://u:${SECRET}@host/v1` }),
      () => new Worker({ kernelUrl: `http://u:${SECRET}@h`, gatewayUrl: 'http://g', provider: new MockProvider() }),
    ]) {
      expect(() => f()).toThrow(expect.objectContaining({ message: expect.not.stringContaining(SECRET) }));
    }
  });
});

describe('no message quotes a URL password (svc-worker(1) DESCRIPTION: the log; FAILURES: the messages the kernel keeps)', () => {
  it('urlHasCredentials and withoutCredentials', () => {
    expect(urlHasCredentials('http://u:p@h/v1')).toBe(true);
    expect(urlHasCredentials('http://u@h')).toBe(true);
    expect(urlHasCredentials('http://u:p@h:99999')).toBe(true); // does not parse: judged by its shape
    expect(urlHasCredentials('http://h/a@b')).toBe(false);
    expect(urlHasCredentials('http://127.0.0.1:7401')).toBe(false);
    expect(withoutCredentials(`fetch: http://u:${SECRET}@h:1/x and https://a:b@c@d/e`)).toBe('fetch: http://h:1/x and https://d/e');
  });

  it("an unreachable peer's error, and fetch's own refusal, leave the password out", async () => {
    expect(new UnreachableError(`http://u:${SECRET}@127.0.0.1:2`, 'ECONNREFUSED').message).toBe('cannot reach http://127.0.0.1:2 (ECONNREFUSED)');
    const err = await requestJson({ baseUrl: `http://u:${SECRET}@127.0.0.1:2` }, 'GET', '/x').catch((e: Error) => e);
    expect(err).toBeInstanceOf(StepError);
    expect((err as Error).message).toContain('cannot reach http://127.0.0.1:2');
    expect((err as Error).message).not.toContain(SECRET);
  });

  it('a step failure whose message quotes such a URL reaches the kernel without the password', async () => {
    const kernel = await new FakeKernel().start();
    const gateway = await new FakeGateway().start();
    const provider: Provider = {
      name: 'leaky',
      complete: async () => {
        throw new StepError('provider_error', `cannot reach the model provider at http://u:${SECRET}@10.0.0.1/v1 (ECONNREFUSED)`, false);
      },
    };
    const worker = new Worker({ kernelUrl: kernel.url, gatewayUrl: gateway.url, provider, waitSeconds: 1 });
    const errors: any[] = [];
    worker.on('step:error', (e) => errors.push(e));
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await kernel.close();
      await gateway.close();
    });
    worker.start();
    const lease = makeLease({ step: 'triage', step_def: { id: 'triage', kind: 'model', prompt: 'triage' } }, { prompts: { triage: 'go' } });
    kernel.offer(lease);
    await until(() => errors.length > 0, 5000, 'the step failure');
    const sent = kernel.calls('POST', `/v1/leases/${lease.lease_id}/fail`)[0]!.body;
    expect(sent.error).toEqual({ code: 'provider_error', message: 'cannot reach the model provider at http://10.0.0.1/v1 (ECONNREFUSED)' });
    expect(JSON.stringify(errors)).not.toContain(SECRET);
  });
});

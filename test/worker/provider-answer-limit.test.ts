// The provider's answer is read up to the service's body limit (svc-worker(1) FAILURES
// payload_too_large: deterministic, over 1 MiB; decisions §10): a larger answer fails as soon as
// it is past the limit and its download is cut off, instead of being held in memory whole.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { OpenAiProvider, PROVIDER_ANSWER_LIMIT_BYTES } from '../../src/worker/providers/openai.js';
import type { ProviderRequest } from '../../src/worker/providers/provider.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function req(): ProviderRequest {
  return { run_id: 'run_1', step: 'triage', turn: 0, messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal };
}

/**
 * A chat-completions server whose answer streams slowly: 64 KiB every 25 ms, 8 MiB in all
 * (about 3 s for the whole), the start of a JSON answer with a long content.
 */
async function slowHugeAnswer(status = 200, headers: Record<string, string> = {}) {
  const seen = { written: 0, closedAt: 0 };
  const chunk = 'x'.repeat(64 * 1024);
  const server = createServer((request, res: ServerResponse) => {
    request.resume();
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.write('{"choices":[{"message":{"role":"assistant","content":"');
    const timer = setInterval(() => {
      if (seen.written >= 8 * 1024 * 1024) {
        clearInterval(timer);
        res.end('"}}]}');
        return;
      }
      res.write(chunk);
      seen.written += chunk.length;
    }, 25);
    res.on('close', () => {
      clearInterval(timer);
      seen.closedAt = Date.now();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, seen };
}

describe('a provider answer over 1 MiB is payload_too_large at once (svc-worker(1) FAILURES payload_too_large)', () => {
  it('streamed: fails deterministic as soon as it is past the limit, and the download stops', async () => {
    expect(PROVIDER_ANSWER_LIMIT_BYTES).toBe(1024 * 1024);
    const { baseUrl, seen } = await slowHugeAnswer();
    const t0 = Date.now();
    const err = await new OpenAiProvider({ baseUrl, retries: 0 }).complete(req()).catch((e: unknown) => e);
    const took = Date.now() - t0;
    expect(err).toMatchObject({ code: 'payload_too_large', deterministic: true, message: "the model provider's answer is over the 1048576-byte limit; it was not read further" });
    // About 16 chunks (0.4 s) to pass 1 MiB; the whole body would take over 3 s.
    expect(took).toBeLessThan(2000);
    // The connection was closed under the server, far short of the 8 MiB it would send.
    await new Promise((r) => setTimeout(r, 200));
    expect(seen.closedAt).toBeGreaterThan(0);
    expect(seen.written).toBeLessThan(4 * 1024 * 1024);
  });

  it('declared: a Content-Length over the limit fails before any of it is read', async () => {
    const { baseUrl } = await slowHugeAnswer(200, { 'content-length': String(300 * 1024 * 1024) });
    const t0 = Date.now();
    await expect(new OpenAiProvider({ baseUrl, retries: 0 }).complete(req())).rejects.toMatchObject({ code: 'payload_too_large', deterministic: true });
    expect(Date.now() - t0).toBeLessThan(500);
  });

  it("an error answer over the limit stays the status's failure, quoting its start", async () => {
    const { baseUrl } = await slowHugeAnswer(502);
    const t0 = Date.now();
    const err = await new OpenAiProvider({ baseUrl, retries: 0 }).complete(req()).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'provider_error', deterministic: false });
    expect((err as Error).message).toMatch(/^model provider failed: HTTP 502 \{"choices"/);
    expect(Date.now() - t0).toBeLessThan(2000);
  });
});

/**
 * Each request's debug line names the stable error code of an error answer (I error envelope),
 * so a log shows why requests failed without the bodies: svcd(8) LOGS.
 */
import { describe, expect, it } from 'vitest';
import { capturedLogger } from '../gateway/helpers.js';
import { startTestDaemon } from '../helpers/daemon.js';

describe('request lines (svcd(8) LOGS)', () => {
  it('carry the error code of a 4xx answer, and none on a success', async () => {
    const { logger, text } = capturedLogger();
    await using d = await startTestDaemon({ logger });
    expect((await d.kernel_('/health')).status).toBe(200);
    expect((await d.kernel_('/runs/run_nope')).status).toBe(404);
    expect((await d.kernel_('/remits', { body: { tools: 'x' } })).status).toBe(400);
    expect((await d.kernel_('/no-such-route')).status).toBe(404);
    await new Promise((r) => setTimeout(r, 50));
    const lines = text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    const byUrl = (url: string) => lines.find((l) => l.url === url);
    expect(byUrl('/v1/health')).toMatchObject({ status: 200 });
    expect(byUrl('/v1/health')).not.toHaveProperty('code');
    expect(byUrl('/v1/runs/run_nope')).toMatchObject({ status: 404, code: 'not_found' });
    expect(byUrl('/v1/remits')).toMatchObject({ status: 400, code: 'request_invalid' });
    expect(byUrl('/v1/no-such-route')).toMatchObject({ status: 404, code: 'not_found' });
  });
});

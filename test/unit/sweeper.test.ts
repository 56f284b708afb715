/** Sweeper (decisions §6 lease expiry in the background): a failing tick is logged, not once per tick. */
import { describe, expect, it } from 'vitest';
import { Redactor } from '../../src/log/logger.js';
import { Sweeper } from '../../src/kernel/sweeper.js';
import { capturedLogger } from '../gateway/helpers.js';

describe('Sweeper', () => {
  it('logs the same failure once however many ticks meet it, and a different one at once; every tick still runs', async () => {
    const log = capturedLogger(new Redactor());
    let ticks = 0;
    let code = 'SQLITE_IOERR';
    const sweeper = new Sweeper(
      async () => {
        ticks++;
        throw Object.assign(new Error('disk I/O error'), { code });
      },
      0,
      log.logger,
    );
    for (let i = 0; i < 20; i++) await sweeper.runOnce();
    code = 'SQLITE_CORRUPT';
    await sweeper.runOnce();
    const lines = log.text().split('\n').filter((l) => l.includes('sweeper tick failed')).map((l) => JSON.parse(l));
    expect(ticks).toBe(21);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ level: 'error', err: expect.stringContaining('disk I/O error') });
    expect(lines[1].err).toContain('disk I/O error'); // the message is the same, the code differs
  });
});

/**
 * surviveBrokenPipes (src/log/logger.ts): a log reader that went away, a broken pipe or a
 * terminal that hung up (the SIGHUP svcd and svc worker drain on, svcd(8) and svc-worker(1)
 * SIGNALS), loses the lines and leaves the process running; any other stream error is thrown.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { surviveBrokenPipes } from '../../src/log/logger.js';

const failure = (code: string) => Object.assign(new Error(`write ${code}`), { code });

describe('surviveBrokenPipes', () => {
  it('swallows EPIPE and EIO (a hung-up terminal), rethrows the rest', () => {
    const stream = new EventEmitter() as unknown as NodeJS.WriteStream;
    surviveBrokenPipes(stream);
    expect(() => stream.emit('error', failure('EPIPE'))).not.toThrow();
    expect(() => stream.emit('error', failure('EIO'))).not.toThrow();
    expect(() => stream.emit('error', failure('ENOSPC'))).toThrow('write ENOSPC');
  });
});

/**
 * The descriptor watch of svcd(8) LIMITS (src/metrics/descriptors.ts): the limit read from
 * /proc/self/limits, one warning as the open count reaches 90 % of it and one line once back
 * under 80 %, and the two gauges read at scrape time.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { descriptorReader, DescriptorWatch, parseMaxOpenFiles, readDescriptors, registerDescriptorGauges, type DescriptorReading } from '../../src/metrics/descriptors.js';
import type { Logger } from '../../src/log/logger.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 524288               files
Max locked memory         8388608              8388608              bytes
`;

function recordingLogger(lines: Array<[string, string]>): Logger {
  const log = (level: string) => (msg: string) => void lines.push([level, msg]);
  const logger: Logger = { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error'), child: () => logger };
  return logger;
}

describe('descriptors (svcd(8) LIMITS)', () => {
  it('reads the soft limit, and none when it is unlimited or missing', () => {
    expect(parseMaxOpenFiles(LIMITS)).toBe(1024);
    expect(parseMaxOpenFiles(LIMITS.replace('1024    ', 'unlimited'))).toBeNull();
    expect(parseMaxOpenFiles('Limit Soft Hard Units\n')).toBeNull();
  });

  it('reads this process on Linux', () => {
    const r = readDescriptors();
    expect(r).not.toBeNull();
    expect(r!.open).toBeGreaterThan(2);
    expect(r!.open).toBeLessThanOrEqual(r!.max);
  });

  it('warns once at 90 %, says so once back under 80 %, and warns again on the next climb', () => {
    const lines: Array<[string, string]> = [];
    let reading: DescriptorReading | null = { open: 10, max: 100 };
    const watch = new DescriptorWatch(recordingLogger(lines), () => reading);
    const at = (open: number) => {
      reading = { open, max: 100 };
      watch.look();
      return lines.map(([level]) => level).join(',');
    };
    expect(at(89)).toBe('');
    expect(at(90)).toBe('warn');
    expect(at(99)).toBe('warn');
    expect(at(85)).toBe('warn');
    expect(at(80)).toBe('warn');
    expect(at(79)).toBe('warn,info');
    expect(at(50)).toBe('warn,info');
    expect(at(95)).toBe('warn,info,warn');
    expect(lines[0]![1]).toMatch(/^open file descriptors near the limit/);
    reading = null; // no /proc: nothing said
    watch.look();
    expect(lines).toHaveLength(3);
  });

  it('reads the limit it knows as the count when /proc cannot be read for want of a descriptor (review 26)', () => {
    let fail: string | null = null;
    const read = descriptorReader({
      limits: () => {
        if (fail) throw Object.assign(new Error(fail), { code: fail });
        return LIMITS;
      },
      fds: () => ['0', '1', '2', '3'],
    });
    expect(read()).toEqual({ open: 3, max: 1024 });
    fail = 'EMFILE';
    expect(read()).toEqual({ open: 1024, max: 1024, atLimit: true });
    fail = 'ENOENT'; // no /proc: nothing to say
    expect(read()).toBeNull();
    const lines: Array<[string, string]> = [];
    fail = 'EMFILE';
    new DescriptorWatch(recordingLogger(lines), read).look();
    expect(lines).toEqual([['warn', expect.stringMatching(/^open file descriptors near the limit/)]]);
  });

  it('shows process_open_fds and process_max_fds as read when scraped (once for both), and nothing without a reading', async () => {
    const registry = new Registry();
    let reading: DescriptorReading | null = { open: 12, max: 1024 };
    let reads = 0;
    registerDescriptorGauges(registry, () => (reads++, reading));
    const text = await registry.metrics();
    expect(text).toContain('\nprocess_open_fds 12\n');
    expect(text).toContain('\nprocess_max_fds 1024\n');
    expect(reads).toBe(1);
    await new Promise((r) => setImmediate(r));
    reading = { open: 13, max: 1024 };
    expect(await registry.metrics()).toContain('\nprocess_open_fds 13\n');
  });
});

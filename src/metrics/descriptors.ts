/**
 * Open file descriptors against the process's limit (Linux: /proc/self). At the limit libuv
 * closes each new connection unanswered and Node is never told, so svcd would refuse clients
 * without a word; instead the count is a metric on both listeners (`process_open_fds`,
 * `process_max_fds`, prom-client's names for them) and svcd logs as it nears the limit.
 * Elsewhere (no /proc) both read null: no metric values, no log.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../log/logger.js';

/** The soft "Max open files" of a /proc/<pid>/limits text; null when absent or unlimited. */
export function parseMaxOpenFiles(limits: string): number | null {
  const line = limits.split('\n').find((l) => l.startsWith('Max open files'));
  const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
  const n = soft === undefined ? NaN : Number(soft);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

/** What the watch and the gauges read: the open count and the limit, or null. */
export interface DescriptorReading {
  open: number;
  max: number;
  /** /proc could not be read for want of a descriptor: the count is taken to be the limit. */
  atLimit?: boolean;
}

/** Where a reading comes from (tests give their own). */
export interface DescriptorSource {
  limits(): string;
  fds(): string[];
}

const PROC: DescriptorSource = {
  limits: () => readFileSync('/proc/self/limits', 'utf8'),
  fds: () => readdirSync('/proc/self/fd'),
};

/**
 * Reads the count and the limit. Reading takes descriptors of its own, so at the limit the
 * read itself fails with EMFILE: that is the reading "at the limit" (with the limit last
 * read), not silence, which would hide exactly what the watch is for.
 */
export function descriptorReader(source: DescriptorSource = PROC): () => DescriptorReading | null {
  let lastMax: number | null = null;
  return () => {
    try {
      const max = parseMaxOpenFiles(source.limits());
      // The listing opens one descriptor of its own to read the directory: not counted.
      const open = source.fds().length - 1;
      lastMax = max;
      return max === null ? null : { open, max };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code === 'EMFILE' || code === 'ENFILE') && lastMax !== null) return { open: lastMax, max: lastMax, atLimit: true };
      return null; // no /proc
    }
  };
}

export const readDescriptors = descriptorReader();

/** `process_open_fds` and `process_max_fds` in `registry`, read when scraped. */
export function registerDescriptorGauges(registry: Registry, read: () => DescriptorReading | null = readDescriptors): void {
  // One read serves both gauges of a scrape: prom-client collects them in one pass.
  let last: { reading: DescriptorReading | null } | null = null;
  const readOnce = () => {
    if (!last) {
      last = { reading: read() };
      setImmediate(() => (last = null));
    }
    return last.reading;
  };
  const gauges = [
    { name: 'process_open_fds', help: 'Open file descriptors of the process', value: (r: DescriptorReading) => r.open },
    { name: 'process_max_fds', help: 'The limit on open file descriptors of the process (the soft one)', value: (r: DescriptorReading) => r.max },
  ];
  for (const { name, help, value } of gauges) {
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const r = readOnce();
        if (r) this.set(value(r));
      },
    });
  }
}

/** Warn at this share of the limit in use; say so again once under `CLEAR_AT`. */
export const WARN_AT = 0.9;
export const CLEAR_AT = 0.8;

/**
 * Looks every `everyMs` and logs a warning when the open descriptors reach 90 % of the limit,
 * once, and an info line when they are back under 80 % (the gap keeps a count near the line
 * from logging every look).
 */
export class DescriptorWatch {
  private near = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly logger: Logger,
    private readonly read: () => DescriptorReading | null = readDescriptors,
  ) {}

  start(everyMs = 5000): this {
    this.timer = setInterval(() => this.look(), everyMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One look (the timer's; tests call it directly). */
  look(): void {
    const r = this.read();
    if (!r) return;
    if (!this.near && r.open >= r.max * WARN_AT) {
      this.near = true;
      const fields = r.atLimit ? { open: r.open, max: r.max, at_limit: true } : { open: r.open, max: r.max };
      this.logger.warn('open file descriptors near the limit: at the limit new connections are closed unanswered; raise it (LimitNOFILE=, ulimit -Hn) or find what holds them', fields);
    } else if (this.near && r.open < r.max * CLEAR_AT) {
      this.near = false;
      this.logger.info('open file descriptors back under 80 % of the limit', { open: r.open, max: r.max });
    }
  }
}

/**
 * Structured logs: one JSON object per line on stderr. Every line passes through the
 * redactor so a `${VAR}` value registered by the gateway config can never be printed.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<LogLevel, number> = { debug: 20, info: 30, warn: 40, error: 50 };
/** The levels, least severe first (what `--log-level` and SVC_LOG_LEVEL accept). */
export const LOG_LEVELS = Object.keys(LEVELS) as LogLevel[];

/** Replaces every registered secret with `[REDACTED]`. One instance per process. */
export class Redactor {
  private secrets: string[] = [];

  /** Registers a value that must never appear in output (ignores values under 4 chars). */
  add(secret: string): void {
    if (typeof secret !== 'string' || secret.length < 4 || this.secrets.includes(secret)) return;
    this.secrets.push(secret);
    this.secrets.sort((a, b) => b.length - a.length); // longest first: no partial leaks
  }

  get size(): number {
    return this.secrets.length;
  }

  redact(text: string): string {
    let out = text;
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join('[REDACTED]');
    return out;
  }

  /** Redacts every string inside a JSON value (returns a copy). */
  redactValue<T>(value: T): T {
    if (this.secrets.length === 0) return value;
    return JSON.parse(this.redact(JSON.stringify(value))) as T;
  }
}

/** The process-wide redactor used by logs, errors, responses and events. */
export const globalRedactor = new Redactor();

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

export interface LoggerOptions {
  level?: LogLevel;
  stream?: NodeJS.WritableStream;
  redactor?: Redactor;
  base?: Record<string, unknown>;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const min = LEVELS[opts.level ?? 'info'];
  const stream = opts.stream ?? process.stderr;
  const redactor = opts.redactor ?? globalRedactor;
  const base = opts.base ?? {};
  const write = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (LEVELS[level] < min) return;
    const line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...base, ...fields });
    stream.write(redactor.redact(line) + '\n');
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (f) => createLogger({ ...opts, base: { ...base, ...f } }),
  };
}

/** A logger that prints nothing (tests). */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};

/**
 * Structured logs: one JSON object per line on stderr. Every line passes through the
 * redactor so a `${VAR}` value registered by the gateway config can never be printed.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<LogLevel, number> = { debug: 20, info: 30, warn: 40, error: 50 };
/** The levels, least severe first (what `--log-level` and SVC_LOG_LEVEL accept). */
export const LOG_LEVELS = Object.keys(LEVELS) as LogLevel[];

/** What a secret becomes wherever it would have appeared. */
export const REDACTED = '[REDACTED]';

/**
 * Shorter values are not registered: redacting every `80` or `on` would mangle every answer,
 * and a credential that short is no secret anyway (documented in svc-gateway(5), SECRETS).
 */
export const MIN_SECRET_LENGTH = 4;

/**
 * Replaces every registered secret with `[REDACTED]`. One instance per process.
 *
 * Text is redacted as text; JSON values are walked, so a secret inside a number, a key or a
 * string holding JSON text never breaks the value around it (a number that would show a secret
 * becomes the string `[REDACTED]`).
 */
export class Redactor {
  private secrets: string[] = [];

  /** Registers a value that must never appear in output (ignores values under MIN_SECRET_LENGTH). */
  add(secret: string): void {
    if (typeof secret !== 'string' || secret.length < MIN_SECRET_LENGTH || this.secrets.includes(secret)) return;
    this.secrets.push(secret);
    this.secrets.sort((a, b) => b.length - a.length); // longest first: no partial leaks
  }

  get size(): number {
    return this.secrets.length;
  }

  /** True when `text` shows any registered secret. */
  shows(text: string): boolean {
    return this.secrets.some((s) => text.includes(s));
  }

  redact(text: string): string {
    let out = text;
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join(REDACTED);
    return out;
  }

  /** Redacts every string, key and number inside a JSON value (returns a copy). */
  redactValue<T>(value: T): T {
    if (this.secrets.length === 0) return value;
    return this.walk(value, 0) as T;
  }

  /**
   * A serialized JSON body with every secret redacted, still valid JSON: the body is walked
   * as a value when it shows a secret (text replacement could cut `31337` out of `313370`).
   * Text that is not JSON is redacted as text.
   */
  redactJsonText(text: string): string {
    if (!this.shows(text)) return text;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return this.redact(text);
    }
    const out = JSON.stringify(this.walk(value, 0));
    // A secret spelt only by JSON's own syntax (`true`, `null`) would survive the walk.
    return this.shows(out) ? this.redact(out) : out;
  }

  private walk(v: unknown, depth: number): unknown {
    if (typeof v === 'string') return this.redact(v);
    if (typeof v === 'number' || typeof v === 'bigint') return this.shows(String(v)) ? REDACTED : v;
    if (v === null || typeof v !== 'object') return v;
    // Values reach here already bounded in depth (decisions §10 and json-limits); the guard
    // keeps a cyclic object from looping.
    if (depth > 1000) return REDACTED;
    const toJson = (v as { toJSON?: () => unknown }).toJSON;
    if (typeof toJson === 'function') return this.walk(toJson.call(v), depth + 1);
    if (Array.isArray(v)) return v.map((x) => (x === undefined || typeof x === 'function' ? null : this.walk(x, depth + 1)));
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined || typeof x === 'function' || typeof x === 'symbol') continue;
      out[this.redact(k)] = this.walk(x, depth + 1);
    }
    return out;
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
    stream.write(redactor.redactJsonText(line) + '\n');
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

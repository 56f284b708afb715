/**
 * Structured logs: one JSON object per line on stderr. Every line passes through the
 * redactor so a `${VAR}` value registered by the gateway config can never be printed.
 */
import { spansBehindEscapes, unescapeOnce, UNESCAPE_LEVELS } from '../encoding/json-unescape.js';
import { SecretMatcher } from './secret-matcher.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<LogLevel, number> = { debug: 20, info: 30, warn: 40, error: 50 };
/** The levels, least severe first (what `--log-level` and SVC_LOG_LEVEL accept). */
export const LOG_LEVELS = Object.keys(LEVELS) as LogLevel[];

/** `--log-level` or SVC_LOG_LEVEL: one of the four levels (unset: info), or an error naming them. */
export function logLevelOf(value: string | undefined, source: string): LogLevel {
  if (value === undefined || value === '') return 'info';
  if ((LOG_LEVELS as string[]).includes(value)) return value as LogLevel;
  throw new Error(`${source} "${value}" must be one of ${LOG_LEVELS.join(', ')}`);
}

/** What a secret becomes wherever it would have appeared. */
export const REDACTED = '[REDACTED]';

/**
 * Shorter values are not registered: redacting every `80` or `on` would mangle every answer,
 * and a credential that short is no secret anyway (documented in svc-gateway(5), SECRETS).
 */
export const MIN_SECRET_LENGTH = 4;

const JSON_WORDS = new Set(['true', 'false', 'null']);

/**
 * Replaces every registered secret with `[REDACTED]`. One instance per process.
 *
 * Text is redacted as text; JSON values are walked, so a secret inside a number, a key or a
 * string holding JSON text never breaks the value around it (a number that would show a secret
 * becomes the string `[REDACTED]`).
 */
export class Redactor {
  private readonly matcher = new SecretMatcher();

  /**
   * Registers a value that must never appear in output; `anyCase` matches it with any of its
   * letters in the other case too (src/log/secret-spellings.ts decides which spellings may be).
   * Ignored: values under MIN_SECRET_LENGTH, and JSON's own words (`true`, `false`, `null`),
   * which every answer spells (`"ok":true`) and which protect nothing.
   */
  add(secret: string, anyCase = false): void {
    if (typeof secret !== 'string' || secret.length < MIN_SECRET_LENGTH || JSON_WORDS.has(secret)) return;
    this.matcher.add(secret, anyCase);
  }

  get size(): number {
    return this.matcher.size;
  }

  /**
   * True when `text` shows any registered secret, as is or behind JSON escapes undone up to
   * `levels` times. Each level is one linear pass, built only while no secret has shown.
   */
  shows(text: string, levels = UNESCAPE_LEVELS): boolean {
    if (this.matcher.test(text)) return true;
    let current: string | null = text;
    for (let level = 0; level < levels && current.includes('\\'); level++) {
      current = unescapeOnce(current);
      if (current === null) return false;
      if (this.matcher.test(current)) return true;
    }
    return false;
  }

  /**
   * Replaces every secret with `[REDACTED]`, also where the text spells it with JSON escapes
   * (`\/` for `/`, `\u0074` for `t`, or escaped again and again: JSON text inside JSON text): an
   * upstream's serializer escapes as it pleases (PHP writes `\/`, Go `\u0026` for `&`), and
   * the gateway hands the raw body on beside its parse. Overlapping hits become one.
   */
  redact(text: string): string {
    if (this.matcher.size === 0) return text;
    return this.replaced(text, this.spans(text));
  }

  /** The spans of `text` that spell a secret, as is or behind JSON escapes, in no set order. */
  private spans(text: string): Array<[number, number]> {
    const spans = this.matcher.spans(text);
    if (text.includes('\\')) {
      const escaped = spansBehindEscapes(text, UNESCAPE_LEVELS, (view) => this.matcher.spans(view).map(([start, end]) => [start, end, null] as [number, number, null]));
      if (escaped.length > 0) spans.push(...escaped.map(({ start, end }) => [start, end] as [number, number]));
    }
    return spans;
  }

  /** `text` with each span replaced by REDACTED, overlapping ones as one. */
  private replaced(text: string, spans: Array<[number, number]>): string {
    if (spans.length === 0) return text;
    spans.sort((a, b) => a[0] - b[0]);
    let out = '';
    let done = 0;
    for (const [start, end] of spans) {
      if (end <= done) continue; // inside a span already replaced
      out += text.slice(done, Math.max(start, done)) + (start >= done ? REDACTED : '');
      done = end;
    }
    return out + text.slice(done);
  }

  /**
   * `text` as an HTTP stack hands on a header name, lower-cased: redacted, and every secret's
   * lower-cased spelling too (an upstream naming a response header after a credential). Only
   * there for a short value: registered, the lower-cased spellings would redact every case
   * variant of a value such as a user name in every output (longer ones are matched in any
   * case everywhere: secret-spellings.ts).
   */
  redactLowerCased(text: string): string {
    if (this.matcher.size === 0) return text;
    // Spans, not one replacement after another: a spelling that is part of another secret's
    // (`admin` of `admin-7`) would otherwise replace its part and leave the rest showing.
    const spans = this.spans(text);
    for (const lower of this.matcher.lowerCased()) {
      for (let at = text.indexOf(lower); at !== -1; at = text.indexOf(lower, at + 1)) spans.push([at, at + lower.length]);
    }
    return this.replaced(text, spans);
  }

  /**
   * A JSON copy of `value` (what JSON.stringify makes of it) with every string, key and
   * number that shows a secret redacted. A value that shows none costs one stringify and
   * one parse; a cyclic one throws, as JSON.stringify does.
   */
  redactValue<T>(value: T): T {
    if (this.matcher.size === 0) return value;
    const text = JSON.stringify(value);
    if (text === undefined) return value;
    const plain = JSON.parse(text) as unknown;
    return (this.shows(text, UNESCAPE_LEVELS + 1) ? this.walk(plain) : plain) as T;
  }

  /**
   * A serialized JSON body with every secret redacted, still valid JSON: the body is walked
   * as a value when it shows a secret (text replacement could cut `31337` out of `313370`).
   * Text that is not JSON is redacted as text.
   */
  redactJsonText(text: string): string {
    if (!this.shows(text, UNESCAPE_LEVELS + 1)) return text;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return this.redact(text);
    }
    const out = JSON.stringify(this.walk(value));
    // A secret spelt across JSON's own syntax (a quote, a comma) survives the walk: leaking
    // it is worse than a body that no longer parses.
    return this.shows(out) ? this.redact(out) : out;
  }

  /** Redacts a parsed JSON value (strings, keys, numbers; a number showing a secret becomes a string). */
  private walk(v: unknown): unknown {
    if (typeof v === 'string') return this.redact(v);
    if (typeof v === 'number') return this.shows(String(v)) ? REDACTED : v;
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map((x) => this.walk(x));
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      // defineProperty: a `__proto__` key is data here, not the object's prototype.
      Object.defineProperty(out, this.redact(k), { value: this.walk(x), enumerable: true, writable: true, configurable: true });
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

/**
 * A log reader that went away (a shipper restarting, `| head`) must not take a long-running
 * process, and the work it holds, with it: on a broken pipe the lines are lost and the
 * process goes on. So for a terminal that hung up (EIO: the SIGHUP that closed it is being
 * drained, and the drain's own log line must not end it). Any other stream error is thrown.
 */
export function surviveBrokenPipes(...streams: NodeJS.WriteStream[]): void {
  for (const stream of streams) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'EIO') throw err;
    });
  }
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

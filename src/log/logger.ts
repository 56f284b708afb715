/**
 * Structured logs: one JSON object per line on stderr. Every line passes through the
 * redactor so a `${VAR}` value registered by the gateway config can never be printed.
 */

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
const MIN_SECRET_LENGTH = 4;

const JSON_WORDS = new Set(['true', 'false', 'null']);

/**
 * Replaces every registered secret with `[REDACTED]`. One instance per process.
 *
 * Text is redacted as text; JSON values are walked, so a secret inside a number, a key or a
 * string holding JSON text never breaks the value around it (a number that would show a secret
 * becomes the string `[REDACTED]`).
 */
export class Redactor {
  private secrets: string[] = [];

  /**
   * Registers a value that must never appear in output. Ignored: values under
   * MIN_SECRET_LENGTH, and JSON's own words (`true`, `false`, `null`), which every answer
   * spells (`"ok":true`) and which protect nothing.
   */
  add(secret: string): void {
    if (typeof secret !== 'string' || secret.length < MIN_SECRET_LENGTH || JSON_WORDS.has(secret) || this.secrets.includes(secret)) return;
    this.secrets.push(secret);
    this.secrets.sort((a, b) => b.length - a.length); // longest first: no partial leaks
  }

  get size(): number {
    return this.secrets.length;
  }

  /**
   * True when `text` shows any registered secret, as is or behind JSON escapes undone up to
   * `levels` times. Each level is one linear pass, built only while no secret has shown.
   */
  shows(text: string, levels = UNESCAPE_LEVELS): boolean {
    if (this.secrets.some((s) => text.includes(s))) return true;
    let current: string | null = text;
    for (let level = 0; level < levels && current.includes('\\'); level++) {
      current = unescapeOnce(current);
      if (current === null) return false;
      if (this.secrets.some((s) => current!.includes(s))) return true;
    }
    return false;
  }

  /**
   * Replaces every secret with `[REDACTED]`, also where the text spells it with JSON escapes
   * (`\/` for `/`, `\u0074` for `t`, or escaped again and again: JSON text inside JSON text): an
   * upstream's serializer escapes as it pleases (PHP writes `\/`, Go `\u0026` for `&`), and
   * the gateway hands the raw body on beside its parse.
   */
  redact(text: string): string {
    let out = this.secrets.length > 0 && text.includes('\\') ? this.redactEscaped(text) : text;
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join(REDACTED);
    return out;
  }

  /**
   * The spans of `text` that unescape to a secret, each replaced whole. The views are built
   * as text first (cheap); where each character came from is worked out only when one of
   * them shows a secret.
   */
  private redactEscaped(text: string): string {
    const views: string[] = [];
    for (let current: string | null = text; views.length < UNESCAPE_LEVELS && current.includes('\\'); ) {
      current = unescapeOnce(current);
      if (current === null) break;
      views.push(current);
    }
    const hit = views.map((v) => this.secrets.some((s) => v.includes(s)));
    const last = hit.lastIndexOf(true);
    if (last === -1) return text;
    const spans: Array<[number, number]> = [];
    let current = text;
    let from: Int32Array | null = null; // where each character of `current` began in `text`
    for (let level = 0; level <= last; level++) {
      const view = unescapeMapped(current);
      const outer: Int32Array | null = from;
      const composed: Int32Array = outer ? view.from.map((i) => outer[i]!) : view.from;
      if (hit[level]) {
        for (const s of this.secrets) {
          for (let at = view.text.indexOf(s); at !== -1; at = view.text.indexOf(s, at + s.length)) spans.push([composed[at]!, composed[at + s.length]!]);
        }
      }
      current = view.text;
      from = composed;
    }
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
   * A JSON copy of `value` (what JSON.stringify makes of it) with every string, key and
   * number that shows a secret redacted. A value that shows none costs one stringify and
   * one parse; a cyclic one throws, as JSON.stringify does.
   */
  redactValue<T>(value: T): T {
    if (this.secrets.length === 0) return value;
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

/**
 * How many times JSON escapes are undone in search of a secret: JSON text inside JSON text,
 * eight deep (real answers nest two or three). Not "as long as any remain": `\u005c` undoes to
 * a backslash that starts the next escape, so a crafted 5 MiB text could take a level per six
 * characters, each a pass over all of it. A value stringified whole (`redactValue`) is
 * searched one level deeper, since stringifying escaped each of its strings once more.
 */
const UNESCAPE_LEVELS = 8;

/** What each simple escape's letter stands for (by char code), -1 for none. */
const SIMPLE_ESCAPE = (() => {
  const t = new Int32Array(128).fill(-1);
  for (const [letter, value] of Object.entries({ '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' })) t[letter.charCodeAt(0)] = value.charCodeAt(0);
  return t;
})();

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 65 && c <= 70) return c - 55;
  if (c >= 97 && c <= 102) return c - 87;
  return -1;
}

/**
 * Undoes `text`'s JSON escapes once, in one pass over its UTF-16 code units (a backslash that
 * starts no valid escape stands for itself), and records in `from`, when given, where each
 * character of the result began. Returns the result's length, or -1 when nothing was undone.
 */
function unescapeInto(text: string, out: Uint16Array, from: Int32Array | null): number {
  let n = 0;
  let changed = false;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (from) from[n] = i;
    if (c === 92 && i + 1 < length) {
      const d = text.charCodeAt(i + 1);
      const simple = d < 128 ? SIMPLE_ESCAPE[d]! : -1;
      if (simple !== -1) {
        out[n++] = simple;
        i += 1;
        changed = true;
        continue;
      }
      if (d === 117 && i + 5 < length) {
        const h1 = hexValue(text.charCodeAt(i + 2));
        const h2 = hexValue(text.charCodeAt(i + 3));
        const h3 = hexValue(text.charCodeAt(i + 4));
        const h4 = hexValue(text.charCodeAt(i + 5));
        if ((h1 | h2 | h3 | h4) >= 0) {
          out[n++] = (h1 << 12) | (h2 << 8) | (h3 << 4) | h4;
          i += 5;
          changed = true;
          continue;
        }
      }
    }
    out[n++] = c;
  }
  if (from) from[n] = length;
  return changed ? n : -1;
}

/** Code units as a string, unchanged (lone surrogates kept: offsets must not move). */
function fromCodeUnits(units: Uint16Array, n: number): string {
  return Buffer.from(units.buffer, units.byteOffset, n * 2).toString('utf16le');
}

/** `text` with its JSON escapes undone once, or null when it has none. */
function unescapeOnce(text: string): string | null {
  const out = new Uint16Array(text.length);
  const n = unescapeInto(text, out, null);
  return n === -1 ? null : fromCodeUnits(out, n);
}

/** The same, with where in `text` each character of the result began (`from[length]` is the end). */
function unescapeMapped(text: string): { text: string; from: Int32Array } {
  const out = new Uint16Array(text.length);
  const from = new Int32Array(text.length + 1);
  const n = unescapeInto(text, out, from);
  if (n === -1) return { text, from: from.map((_, i) => i) };
  return { text: fromCodeUnits(out, n), from: from.subarray(0, n + 1) };
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
 * process goes on. Any other stream error is still thrown.
 */
export function surviveBrokenPipes(...streams: NodeJS.WriteStream[]): void {
  for (const stream of streams) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
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

/**
 * The data boundary (interface 5.5): before anything reaches a model provider, content of a
 * data class the run's remit does not grant is replaced by `[REDACTED:<class>]`. Classes come
 * from two places: tool descriptors (`data_classes` maps result field names to a class) and the
 * built-in detectors (email, phone, national ids as `pii`; card numbers as `pci`).
 *
 * Pure: no I/O. The worker posts one `note` event per returned Redaction (class, JSON-pointer
 * path and count, never the content).
 */
import { spansBehindEscapes, UNESCAPE_LEVELS } from '../encoding/json-unescape.js';
import { pointerToken } from '../encoding/json-pointer.js';
import { textProblem } from '../encoding/json-limits.js';
import type { ToolDescriptor } from '../types.js';
import { BUILTIN_DETECTORS, findAll, type Detector } from './detectors.js';

/** What the boundary lets through. */
export interface BoundaryPolicy {
  /** Classes the remit grants: their content passes un-redacted. */
  grants: readonly string[];
  /**
   * Field name → class, from descriptors' `data_classes`. A plain name matches that field at
   * any depth; a dotted name (`customer.email`) matches a path ending in those fields. Names
   * compare case-insensitively. (Default: {})
   */
  fieldClasses?: Readonly<Record<string, string>>;
  /** Content detectors. (Default: BUILTIN_DETECTORS) */
  detectors?: readonly Detector[];
}

/** One redaction: where, of which class, and how many values were replaced there. */
export interface Redaction {
  class: string;
  /** JSON pointer (RFC 6901) of the redacted value, rooted at the caller's base path. */
  path: string;
  count: number;
}

export interface Redacted<T> {
  value: T;
  redactions: Redaction[];
}

/** The text that replaces redacted content. */
export function marker(cls: string): string {
  return `[REDACTED:${cls}]`;
}


/** Field classes of a set of tool descriptors (later descriptors win on a clash). */
export function fieldClassesOf(descriptors: Iterable<Partial<ToolDescriptor> | null | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const d of descriptors) {
    const dc = d?.data_classes;
    if (!dc || typeof dc !== 'object') continue;
    for (const [field, cls] of Object.entries(dc)) if (typeof cls === 'string' && cls) out[field] = cls;
  }
  return out;
}

interface Compiled {
  granted: Set<string>;
  detectors: readonly Detector[];
  /** Lower-cased field path (segments) → class. */
  fields: Array<{ segments: string[]; cls: string }>;
  /** JSON texts parsed in this redaction (both phases read them): text → value, or null. */
  parsedTexts: Map<string, object | null>;
}

function compile(policy: BoundaryPolicy): Compiled {
  const granted = new Set(policy.grants);
  const detectors = (policy.detectors ?? BUILTIN_DETECTORS).filter((d) => !granted.has(d.class));
  const fields = Object.entries(policy.fieldClasses ?? {})
    .filter(([, cls]) => !granted.has(cls))
    .map(([name, cls]) => ({ segments: name.toLowerCase().split('.').filter(Boolean), cls }))
    .filter((f) => f.segments.length > 0);
  return { granted, detectors, fields, parsedTexts: new Map() };
}

/** Known sensitive literals (value → class): once found anywhere, removed everywhere. */
type Known = Map<string, string>;

/**
 * Whether a literal is specific enough to scrub wherever it appears: four characters with a
 * letter, or seven digits; so a classified `"age": 42` cannot blank every 42 in the text.
 */
function scrubbable(text: string): boolean {
  const t = text.trim();
  if (t.length < 4) return false;
  return /[A-Za-z@]/.test(t) || (t.match(/\d/g)?.length ?? 0) >= 7;
}

/** Detector findings and known literals in `text` (offsets in `text`). */
function findingsIn(text: string, c: Compiled, known: Known): Array<[number, number, string]> {
  const found: Array<[number, number, string]> = findAll(text, c.detectors).map((f) => [f.start, f.end, f.class]);
  for (const [value, cls] of known) {
    for (let at = text.indexOf(value); at >= 0; at = text.indexOf(value, at + value.length)) found.push([at, at + value.length, cls]);
  }
  return found;
}

/**
 * What to withhold in `text`: findings as it reads, and behind JSON escapes (an http tool's raw
 * `body` beside its parsed `json`, JSON text in a sqlite column: a Python upstream writes
 * `Ren\u00e9e`, PHP `sk_live_ABC\/DEF`), each escaped spelling withheld whole.
 */
function spansOf(text: string, c: Compiled, known: Known): Array<{ start: number; end: number; cls: string }> {
  const found = findingsIn(text, c, known).map(([start, end, cls]) => ({ start, end, cls }));
  if (text.includes('\\')) {
    for (const s of spansBehindEscapes(text, UNESCAPE_LEVELS, (view) => findingsIn(view, c, known))) found.push({ start: s.start, end: s.end, cls: s.tag });
  }
  found.sort((a, b) => a.start - b.start || b.end - a.end);
  // Merge overlapping findings into spans; a span takes the class of its first finding.
  const spans: typeof found = [];
  for (const f of found) {
    const last = spans[spans.length - 1];
    if (last && f.start < last.end) last.end = Math.max(last.end, f.end);
    else spans.push({ ...f });
  }
  return spans;
}

/** Replaces every ungranted finding and known literal in `text`; repeats until none is left. */
function redactString(text: string, c: Compiled, known: Known): { text: string; counts: Map<string, number> } {
  const counts = new Map<string, number>();
  if (c.detectors.length === 0 && known.size === 0) return { text, counts };
  let out = text;
  for (let round = 0; round < 8; round++) {
    const spans = spansOf(out, c, known);
    if (spans.length === 0) return { text: out, counts };
    let next = '';
    let at = 0;
    for (const s of spans) {
      next += out.slice(at, s.start) + marker(s.cls);
      at = s.end;
      counts.set(s.cls, (counts.get(s.cls) ?? 0) + 1);
    }
    out = next + out.slice(at);
  }
  // Unreachable with the built-in detectors (a marker never completes a match); a custom
  // detector that keeps matching gets the whole string withheld rather than a leak.
  const rest = spansOf(out, c, known)[0];
  if (rest !== undefined) {
    counts.set(rest.cls, (counts.get(rest.cls) ?? 0) + 1);
    return { text: marker(rest.cls), counts };
  }
  return { text: out, counts };
}

function classOfField(names: string[], c: Compiled): string | null {
  if (c.fields.length === 0 || names.length === 0) return null;
  const lower = names.map((n) => n.toLowerCase());
  for (const f of c.fields) {
    if (f.segments.length > lower.length) continue;
    const tail = lower.slice(lower.length - f.segments.length);
    if (tail.every((s, i) => s === f.segments[i])) return f.cls;
  }
  return null;
}

class Collector {
  private byKey = new Map<string, Redaction>();
  add(path: string, cls: string, count: number): void {
    if (count <= 0) return;
    const key = `${cls}\u0000${path}`;
    const prev = this.byKey.get(key);
    if (prev) prev.count += count;
    else this.byKey.set(key, { class: cls, path, count });
  }
  list(): Redaction[] {
    return [...this.byKey.values()];
  }
}

/**
 * A string holding JSON text (an http tool's raw `body` beside its parsed `json`, a JSON
 * column): its parse when it is an object or an array, else null. Only looked for while some
 * field is classified: a classified value too short to scrub as a literal (a salary of 95000,
 * a code `X7Q`) is found by its field name in the parse, never in the text.
 */
function jsonTextValue(text: string, c: Compiled): object | null {
  if (c.fields.length === 0) return null;
  const t = text.trimStart();
  if (t[0] !== '{' && t[0] !== '[') return null;
  const cached = c.parsedTexts.get(text);
  if (cached !== undefined) return cached;
  c.parsedTexts.set(text, null);
  // Only text naming a classified field is worth a parse (a large body names none, mostly).
  const lower = text.toLowerCase();
  if (!c.fields.some((f) => lower.includes(`"${f.segments[f.segments.length - 1]}"`))) return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  // A parse that changes the document cannot stand in for it: an integer past 2^53 would come
  // back rounded (a card number no detector then knows), a repeated name would hide its first
  // value. Such text is matched as text.
  if (v === null || typeof v !== 'object' || textProblem(text) !== null) return null;
  c.parsedTexts.set(text, v);
  return v;
}

function walk(value: unknown, path: string, names: string[], c: Compiled, known: Known, out: Collector, depth: number): unknown {
  if (typeof value === 'string') {
    // JSON text is redacted as the value it holds, its fields classified by name like any
    // other's, and handed on re-serialized when anything in it was withheld. Reported at the
    // string's own path: a pointer into text would resolve to nothing.
    const parsed = depth <= 200 ? jsonTextValue(value, c) : null;
    if (parsed !== null) {
      const inner = new Collector();
      const redacted = walk(parsed, path, names, c, known, inner, depth + 1);
      const found = inner.list();
      if (found.length > 0) {
        for (const r of found) out.add(path, r.class, r.count);
        return JSON.stringify(redacted);
      }
    }
    const r = redactString(value, c, known);
    for (const [cls, n] of r.counts) out.add(path, cls, n);
    return r.text;
  }
  if (typeof value === 'number' || typeof value === 'bigint') {
    const r = redactString(String(value), c, known);
    if (r.counts.size === 0) return value;
    for (const [cls, n] of r.counts) out.add(path, cls, n);
    return r.text;
  }
  if (value === null || typeof value !== 'object') return value;
  if (depth > 200) {
    // Deeper than any real payload: withhold it instead of recursing without end.
    out.add(path, 'unknown', 1);
    return marker('unknown');
  }
  if (Array.isArray(value)) {
    return value.map((v, i) => walk(v, `${path}/${i}`, names, c, known, out, depth + 1));
  }
  const result: Record<string, unknown> = {};
  for (const [rawKey, v] of Object.entries(value as Record<string, unknown>)) {
    let key = rawKey;
    const kr = redactString(rawKey, c, known);
    if (kr.counts.size > 0) {
      key = kr.text;
      for (let n = 2; Object.prototype.hasOwnProperty.call(result, key); n++) key = `${kr.text}#${n}`;
      for (const [cls, n] of kr.counts) out.add(`${path}/${pointerToken(key)}`, cls, n);
    }
    const childPath = `${path}/${pointerToken(key)}`;
    const childNames = [...names, rawKey];
    const cls = classOfField(childNames, c);
    if (cls !== null && v !== null && v !== undefined) {
      result[key] = marker(cls);
      out.add(childPath, cls, 1);
    } else {
      result[key] = walk(v, childPath, childNames, c, known, out, depth + 1);
    }
  }
  return result;
}

/** Phase one: every ungranted detected value and every classified field's text, by class. */
function collectKnown(value: unknown, names: string[], c: Compiled, known: Known, depth: number, forced: string | null): void {
  if (depth > 200) return;
  const note = (text: string, cls: string) => {
    if (scrubbable(text) && !known.has(text)) known.set(text, cls);
  };
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') {
    const text = String(value);
    const parsed = typeof value === 'string' && forced === null ? jsonTextValue(text, c) : null;
    if (parsed !== null) collectKnown(parsed, names, c, known, depth + 1, null);
    if (forced !== null) note(text, forced);
    for (const f of findAll(text, c.detectors)) note(f.value, f.class);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const v of value) collectKnown(v, names, c, known, depth + 1, forced);
    return;
  }
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    for (const f of findAll(k, c.detectors)) note(f.value, f.class);
    const childNames = [...names, k];
    collectKnown(v, childNames, c, known, depth + 1, forced ?? classOfField(childNames, c));
  }
}

/** One value to redact, with where it sits (for paths) and the field names leading to it. */
export interface BoundaryPart {
  value: unknown;
  /** JSON pointer prefix of every reported path, e.g. `/calls/2/result`. (Default: '') */
  path?: string;
  /** Field names leading to the value, so a value read out of a classified field stays classified. */
  names?: readonly string[];
}

/**
 * A boundary for one step: it remembers every sensitive literal it has seen (a detected value,
 * the text of a classified field), so the same literal is removed from everything redacted
 * after it too, e.g. a customer's name quoted in a later tool's free-text note.
 */
export class DataBoundary {
  private readonly c: Compiled;
  private readonly known: Known = new Map();

  constructor(readonly policy: BoundaryPolicy) {
    this.c = compile(policy);
  }

  /**
   * Redacts several values as one: literals found in any of them are removed from all.
   * Fields whose name has an ungranted class are replaced whole; every string (object keys
   * included) loses detected content of ungranted classes. Inputs are not modified.
   */
  redactParts(parts: readonly BoundaryPart[]): { values: unknown[]; redactions: Redaction[] } {
    const c = this.c;
    const roots = parts.map((p) => {
      const names = [...(p.names ?? [])];
      return { ...p, names, path: p.path ?? '', rootClass: classOfField(names, c) };
    });
    for (const r of roots) {
      if (r.rootClass !== null) collectKnown(r.value, r.names, c, this.known, 0, r.rootClass);
      else collectKnown(r.value, r.names, c, this.known, 0, null);
    }
    const out = new Collector();
    const values = roots.map((r) => {
      if (r.rootClass !== null && r.value !== null && r.value !== undefined) {
        out.add(r.path, r.rootClass, 1);
        return marker(r.rootClass);
      }
      return walk(r.value, r.path, r.names, c, this.known, out, 0);
    });
    c.parsedTexts.clear(); // held for the two phases only, not for the step
    return { values, redactions: out.list() };
  }

  /** Redacts one value (see redactParts). */
  redact<T>(value: T, path = '', names: readonly string[] = []): Redacted<T | string> {
    const r = this.redactParts([{ value, path, names }]);
    return { value: r.values[0] as T | string, redactions: r.redactions };
  }
}

/**
 * Redacts a JSON value once (a fresh DataBoundary): see DataBoundary.redactParts. `basePath`
 * prefixes every reported path; `names` are the field names leading to the value (e.g.
 * ['customer', 'email'] for `{{input.customer.email}}`).
 */
export function redactValue<T>(value: T, policy: BoundaryPolicy, basePath = '', names: readonly string[] = []): Redacted<T | string> {
  return new DataBoundary(policy).redact(value, basePath, names);
}

/** Redacts one text (a rendered prompt), reported at `path`. */
export function redactText(text: string, policy: BoundaryPolicy, path = ''): Redacted<string> {
  return new DataBoundary(policy).redact(text, path) as Redacted<string>;
}

/** The payload of the `note` event recording one redaction (never the content). */
export function redactionNote(r: Redaction, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'redaction', class: r.class, path: r.path, count: r.count, ...extra };
}

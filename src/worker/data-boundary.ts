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
import type { ToolDescriptor } from '../types.js';
import { BUILTIN_DETECTORS, findAll, type Detector } from './detectors.js';
import { jsonStart, parseExact, type ExactParse } from './json-text.js';
import { LiteralSet } from './literal-set.js';

/** What the boundary lets through. */
export interface BoundaryPolicy {
  /** Classes the remit grants: their content passes un-redacted. */
  grants: readonly string[];
  /**
   * Field name → class (or classes), from descriptors' `data_classes`. A plain name matches
   * that field at any depth; a dotted name (`customer.email`) matches a path ending in those
   * fields. Names compare case-insensitively. A field with several classes is withheld unless
   * every one is granted. (Default: {})
   */
  fieldClasses?: Readonly<Record<string, string | readonly string[]>>;
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


/**
 * Field classes of a set of tool descriptors. Two tools may class a field of one name
 * differently (`salary`: `hr` in one, `finance` in another); the boundary sees values, not
 * which tool a name came from, so such a field keeps every class and is withheld unless the
 * remit grants them all.
 */
export function fieldClassesOf(descriptors: Iterable<Partial<ToolDescriptor> | null | undefined>): Record<string, string | string[]> {
  const classes = new Map<string, string[]>(); // a Map: a field may be named `__proto__`
  for (const d of descriptors) {
    const dc = d?.data_classes;
    if (!dc || typeof dc !== 'object') continue;
    for (const [field, cls] of Object.entries(dc)) {
      if (typeof cls !== 'string' || !cls) continue;
      const all = classes.get(field) ?? [];
      if (!all.includes(cls)) all.push(cls);
      classes.set(field, all);
    }
  }
  return Object.fromEntries([...classes].map(([field, all]) => [field, all.length === 1 ? all[0]! : all]));
}

interface Compiled {
  granted: Set<string>;
  detectors: readonly Detector[];
  /** Lower-cased field path (segments) → class. */
  fields: Array<{ segments: string[]; cls: string }>;
  /** JSON texts read in this redaction (both phases read them): text → how, or null (as text). */
  parsedTexts: Map<string, TextRead | null>;
  /** Every marker this boundary may write, one per ungranted class. */
  markers: string[];
}

function compile(policy: BoundaryPolicy): Compiled {
  const granted = new Set(policy.grants);
  const detectors = (policy.detectors ?? BUILTIN_DETECTORS).filter((d) => !granted.has(d.class));
  const fields = Object.entries(policy.fieldClasses ?? {})
    .flatMap(([name, classes]) => (typeof classes === 'string' ? [classes] : classes).filter((cls) => !granted.has(cls)).slice(0, 1).map((cls) => ({ name, cls })))
    .map(({ name, cls }) => ({ segments: name.toLowerCase().split('.').filter(Boolean), cls }))
    .filter((f) => f.segments.length > 0);
  const classes = new Set(['unknown', ...detectors.map((d) => d.class), ...fields.map((f) => f.cls)]);
  return { granted, detectors, fields, parsedTexts: new Map(), markers: [...classes].map(marker) };
}

/** Known sensitive literals (value → class): once found anywhere, removed everywhere. */
type Known = LiteralSet<string>;

/**
 * Whether a literal is specific enough to scrub wherever it appears: four characters with a
 * letter, or seven digits; so a classified `"age": 42` cannot blank every 42 in the text. A
 * letter of any script (`Иван Петров`, `محمد علي` are names as `Dana Smith` is), and a Han,
 * kana or Hangul character counts as two: `王小明` is a whole name.
 */
export function scrubbable(text: string): boolean {
  const t = text.trim();
  let weight = 0;
  // Counted composed (NFC), as a reader counts: a value stored decomposed would otherwise weigh
  // more than the same text composed (`김` as three jamo weighed 6, so a one-syllable surname
  // blanked every 김 in 김치 and 김밥; `Zoë` with a combining mark counted four).
  for (const ch of t.normalize('NFC')) weight += WIDE_SCRIPT.test(ch) ? 2 : 1;
  if (weight < 4) return false;
  return /[\p{L}@]/u.test(t) || (t.match(/\d/g)?.length ?? 0) >= 7;
}

/** Scripts that write a word in few characters (CJK ideographs, kana, Hangul syllables). */
const WIDE_SCRIPT = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Hangul}]/u;

/**
 * Detector findings and known literals in `text` (offsets in `text`). A literal inside one of
 * this boundary's own markers is none: a value that is a part of `[REDACTED:pii]` (an
 * upstream's own "REDACTED", a name such as "REDA") is still removed wherever else it
 * appears, but a marker already written is not withheld again, whole string and all.
 */
function findingsIn(text: string, c: Compiled, known: Known): Array<[number, number, string]> {
  const found: Array<[number, number, string]> = findAll(text, c.detectors).map((f) => [f.start, f.end, f.class]);
  if (known.size > 0) {
    const markers = markerSpans(text, c);
    for (const f of known.findIn(text)) {
      if (!markers.some(([ms, me]) => f[0] >= ms && f[1] <= me)) found.push(f);
    }
  }
  return found;
}

/** Where this boundary's markers (exactly, one per ungranted class) stand in `text`. */
function markerSpans(text: string, c: Compiled): Array<[number, number]> {
  if (!text.includes('[REDACTED:')) return [];
  const spans: Array<[number, number]> = [];
  for (const m of c.markers) {
    for (let at = text.indexOf(m); at >= 0; at = text.indexOf(m, at + m.length)) spans.push([at, at + m.length]);
  }
  return spans;
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
 * How a string holding JSON text is read (see readJsonText); null where it is matched as text.
 * - json: one JSON text, read exactly; walked like any value.
 * - lines: JSON values one a line (NDJSON, JSON Lines); each line read on its own.
 * - withheld: JSON text naming a classified field that cannot be read exactly; withheld whole
 *   as `cls`. `value` is what JSON.parse made of it, if anything (its literals are still noted).
 */
type TextRead =
  | { kind: 'json'; value: object }
  | { kind: 'lines'; lines: Array<{ text: string; read: TextRead | null }> }
  | { kind: 'withheld'; cls: string; value?: unknown };

/**
 * `text` lower-cased, for finding field names in it: with `\uXXXX` escapes read, so a name
 * an upstream escaped (`"sal\u0061ry"`, as JSON.parse reads it) is found too.
 */
function namesView(text: string): string {
  const lower = text.toLowerCase();
  return lower.includes('\\u') ? lower.replace(/\\u([0-9a-f]{4})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)).toLowerCase()) : lower;
}

/**
 * Whether `text` names a field of an ungranted class (`"salary"`, any case); with `asMember`,
 * only as a member name (`"salary":`), as JSON does and prose quoting it does not.
 */
function namesClassified(text: string, c: Compiled, asMember = false): boolean {
  const lower = namesView(text);
  return c.fields.some((f) => {
    const quoted = `"${f.segments[f.segments.length - 1]}"`;
    if (!asMember) return lower.includes(quoted);
    for (let at = lower.indexOf(quoted); at >= 0; at = lower.indexOf(quoted, at + 1)) {
      let k = at + quoted.length;
      while (k < lower.length && WHITESPACE.test(lower[k]!)) k++;
      if (lower[k] === ':') return true;
    }
    return false;
  });
}
const WHITESPACE = /\s/;

/**
 * The class text is withheld as: that of the classified field it names first, or `unknown`
 * when that name stands for several classes (`card.number` pci, `phone.number` pii).
 */
function namedClass(text: string, c: Compiled): string {
  const lower = namesView(text);
  let first = Infinity;
  let classes = new Set<string>();
  for (const f of c.fields) {
    const at = lower.indexOf(`"${f.segments[f.segments.length - 1]}"`);
    if (at < 0 || at > first) continue;
    if (at < first) classes = new Set();
    first = at;
    classes.add(f.cls);
  }
  return classes.size === 1 ? [...classes][0]! : 'unknown';
}

/** JSON text read exactly (parseExact): walked, or withheld when a repeated name hides a value; null for a scalar. */
function readExact(exact: ExactParse, text: string, c: Compiled): TextRead | null {
  if (exact.duplicate) return { kind: 'withheld', cls: namedClass(text, c), value: exact.value };
  const v = exact.value;
  return v !== null && typeof v === 'object' ? { kind: 'json', value: v } : null;
}

/**
 * JSON values one a line (NDJSON, JSON Lines): two or more non-blank lines, each one JSON text
 * but for the last, which may be cut short (a log being written). Null when the text is not
 * that: a pretty-printed document cut short has a first line that is no JSON text on its own,
 * and must not be read line by line (a name on one line, its value on the next). A line
 * naming no classified field is matched as text; one naming one is read like a document, and
 * withheld when it cannot be read exactly.
 */
function readLines(text: string, c: Compiled): TextRead | null {
  const lines = text.split('\n');
  let last = lines.length - 1;
  while (last >= 0 && lines[last]!.trim() === '') last--;
  if (lines.filter((l) => l.trim() !== '').length < 2) return null;
  const out: Array<{ text: string; read: TextRead | null }> = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const t = line.trim();
    if (t === '' || !namesClassified(t, c)) {
      if (t !== '' && i !== last) {
        try {
          JSON.parse(t);
        } catch {
          return null;
        }
      }
      out.push({ text: line, read: null });
      continue;
    }
    const exact = parseExact(t);
    if (exact === null && i !== last) return null;
    out.push({ text: line, read: exact === null ? { kind: 'withheld', cls: namedClass(t, c) } : readExact(exact, t, c) });
  }
  return { kind: 'lines', lines: out };
}

/**
 * A string holding JSON text (an http tool's raw `body` beside its parsed `json`, a file the fs
 * connector read, a JSON column), read so that its fields are classified by name like any
 * other's: a classified value too short to scrub as a literal (a salary of 95000, a code `X7Q`)
 * is found by its field name, never in the text. Only looked for while some field is
 * classified, and only in text that opens as JSON does (after whitespace, a byte order mark or
 * an XSSI prefix: see jsonStart) and names a classified field (a large body names none,
 * mostly); anything else is matched as text. Such text is read exactly or not at all:
 * - one JSON text: numbers JSON.parse would round (an integer past 2^53) kept as their digits;
 * - JSON values one a line (NDJSON): each line on its own (readLines);
 * - anything else (a repeated member name, JSON cut short or followed by more): withheld whole
 *   as the class of the classified field it names first. Matching it as text would let the
 *   short values through.
 */
function readJsonText(text: string, c: Compiled): TextRead | null {
  if (c.fields.length === 0) return null;
  const start = jsonStart(text);
  // Lines of JSON may open with a scalar (`1\n{"salary":95000}`): tried as lines only.
  if (start < 0 && !text.includes('\n')) return null;
  const cached = c.parsedTexts.get(text);
  if (cached !== undefined) return cached;
  c.parsedTexts.set(text, null);
  if (!namesClassified(text, c)) return null;
  if (start < 0) {
    // Lines of JSON, read line by line; text whose first line is JSON (`1`, `"hdr"`) but whose
    // lines cannot all be read is withheld whole, as JSON text that cannot be read is, when it
    // looks like JSON further on (a line opening an object or array, or a classified name used
    // as a member): prose under a title line that only quotes a name is matched as text.
    const looksJson = () => /\n\s*[{[]/.test(text) || namesClassified(text, c, true);
    const read = readLines(text, c) ?? (firstLineIsJson(text) && looksJson() ? { kind: 'withheld' as const, cls: namedClass(text, c) } : null);
    c.parsedTexts.set(text, read);
    return read;
  }
  const body = start === 0 ? text : text.slice(start);
  const exact = parseExact(body);
  const read = exact !== null ? readExact(exact, body, c) : (readLines(body, c) ?? { kind: 'withheld', cls: namedClass(body, c) });
  c.parsedTexts.set(text, read);
  return read;
}

/** Whether the first non-blank line of `text` is a JSON text on its own. */
function firstLineIsJson(text: string): boolean {
  const first = text.split('\n').find((l) => l.trim() !== '');
  if (first === undefined) return false;
  try {
    JSON.parse(first);
    return true;
  } catch {
    return false;
  }
}

/** The values a read of JSON text holds (for collecting literals). */
function valuesOf(read: TextRead): unknown[] {
  if (read.kind === 'json') return [read.value];
  if (read.kind === 'withheld') return read.value === undefined ? [] : [read.value];
  return read.lines.flatMap((l) => (l.read === null ? [] : valuesOf(l.read)));
}

/** Leading and trailing whitespace of a line around its content (`\r` of a CRLF line included). */
function around(line: string, content: string): string {
  const lead = line.length - line.trimStart().length;
  return line.slice(0, lead) + content + line.slice(lead + line.trim().length);
}

/**
 * JSON text walked as the value it holds: the redacted text when anything in it was withheld
 * (re-serialized: a prefix before the JSON is dropped, inexact numbers become strings), else
 * null (the text is then matched as text, as it was written). Reported at the string's own path.
 */
function walkJsonText(read: TextRead, path: string, names: string[], c: Compiled, known: Known, out: Collector, depth: number): string | null {
  if (read.kind === 'withheld') {
    out.add(path, read.cls, 1);
    return marker(read.cls);
  }
  if (read.kind === 'json') {
    const inner = new Collector();
    const redacted = walk(read.value, path, names, c, known, inner, depth + 1);
    const found = inner.list();
    if (found.length === 0) return null;
    for (const r of found) out.add(path, r.class, r.count);
    return JSON.stringify(redacted);
  }
  const inner = new Collector();
  const lines = read.lines.map((l) => (l.read === null ? null : walkJsonText(l.read, path, names, c, known, inner, depth)));
  if (inner.list().length === 0) return null;
  for (const r of inner.list()) out.add(path, r.class, r.count);
  return read.lines
    .map((l, i) => {
      const done = lines[i];
      if (done != null) return around(l.text, done);
      const r = redactString(l.text, c, known);
      for (const [cls, n] of r.counts) out.add(path, cls, n);
      return r.text;
    })
    .join('\n');
}

function walk(value: unknown, path: string, names: string[], c: Compiled, known: Known, out: Collector, depth: number): unknown {
  if (typeof value === 'string') {
    // JSON text is redacted as the value it holds, its fields classified by name like any
    // other's (readJsonText), and handed on re-serialized when anything in it was withheld.
    // Reported at the string's own path: a pointer into text would resolve to nothing. Past
    // the depth bound, JSON text naming a classified field is withheld unread.
    let read: TextRead | null = null;
    if (depth <= 200) read = readJsonText(value, c);
    else if (c.fields.length > 0 && jsonStart(value) >= 0 && namesClassified(value, c)) read = { kind: 'withheld', cls: namedClass(value, c) };
    const done = read === null ? null : walkJsonText(read, path, names, c, known, out, depth);
    if (done !== null) return done;
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
  // The first class found stays. Trimmed too: a CHAR(n) column pads the name it holds, and the
  // name is what appears elsewhere.
  const note = (text: string, cls: string) => {
    for (const t of text === text.trim() ? [text] : [text, text.trim()]) {
      // Composed and decomposed alike (`é` as one character or as e and U+0301): the same text
      // to a reader, and a name typed on one system and stored by another differs so.
      if (scrubbable(t)) for (const form of new Set([t, t.normalize('NFC'), t.normalize('NFD')])) known.add(form, cls);
    }
  };
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') {
    const text = String(value);
    const read = typeof value === 'string' && forced === null ? readJsonText(text, c) : null;
    if (read !== null) for (const v of valuesOf(read)) collectKnown(v, names, c, known, depth + 1, null);
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
  private readonly known: Known = new LiteralSet();

  /** `c` without its detectors: the known literals alone (scrubKnown). */
  private readonly knownOnly: Compiled;

  constructor(readonly policy: BoundaryPolicy) {
    this.c = compile(policy);
    this.knownOnly = { ...this.c, detectors: [] };
  }

  /** How many literals it has learned: unchanged, anything scrubbed before needs no second scrub. */
  get knownCount(): number {
    return this.known.size;
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

  /**
   * `value` with detected content of ungranted classes and known literals removed from every
   * string, object key and number, and nothing read as data: no field is classified by its
   * name and no JSON text is parsed. For text whose structure is not data, such as a tool's
   * JSON Schema, where a property named `email` describes a field and holds no email, and a
   * description quoting `{"email": "string"}` must not make "string" a secret.
   */
  redactStrings<T>(value: T, path = ''): Redacted<T | string> {
    return this.leaves(value, path, this.c);
  }

  /** The known literals removed from every string, key and number of `value` (see scrubKnown). */
  scrubKnownIn<T>(value: T, path = ''): Redacted<T | string> {
    return this.leaves(value, path, this.knownOnly);
  }

  /**
   * `text` with the literals this boundary has learned so far removed, and nothing else (no
   * detectors, no field names): for a message built before a later tool result showed that a
   * name in it is sensitive, so it is not sent again as it was.
   */
  scrubKnown(text: string, path = ''): Redacted<string> {
    return this.leaves(text, path, this.knownOnly) as Redacted<string>;
  }

  /**
   * Every string, object key and number of `value` through redactString with `c`, read as
   * text only; a number keeps its type unless something in it was withheld (an id passed as
   * an integer). Past the depth bound, withheld whole.
   */
  private leaves<T>(value: T, path: string, c: Compiled): Redacted<T | string> {
    const out = new Collector();
    const text = (t: string, at: string): string => {
      const r = redactString(t, c, this.known);
      for (const [cls, n] of r.counts) out.add(at, cls, n);
      return r.text;
    };
    const visit = (v: unknown, at: string, depth: number): unknown => {
      if (typeof v === 'string') return text(v, at);
      if (typeof v === 'number' || typeof v === 'bigint') {
        const t = text(String(v), at);
        return t === String(v) ? v : t;
      }
      if (v === null || typeof v !== 'object') return v;
      if (depth > 200) {
        out.add(at, 'unknown', 1);
        return marker('unknown');
      }
      if (Array.isArray(v)) return v.map((x, i) => visit(x, `${at}/${i}`, depth + 1));
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [text(k, `${at}/${pointerToken(k)}`), visit(x, `${at}/${pointerToken(k)}`, depth + 1)]));
    };
    return { value: visit(value, path, 0) as T | string, redactions: out.list() };
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

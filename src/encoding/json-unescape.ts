/**
 * JSON escapes undone in search of what they spell: a value an upstream's serializer escaped
 * as it pleases (PHP writes `\/`, Go `\u0026`, Python `\u00e9`), or JSON text inside JSON
 * text. Used by the secret redactor (src/log/logger.ts) and the worker's data boundary
 * (src/worker/data-boundary.ts), each with its own idea of what to find.
 */

/**
 * How many times JSON escapes are undone in search of a value: JSON text inside JSON text,
 * eight deep (real answers nest two or three). Not "as long as any remain": `\u005c` undoes to
 * a backslash that starts the next escape, so a crafted 5 MiB text could take a level per six
 * characters, each a pass over all of it.
 */
export const UNESCAPE_LEVELS = 8;

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
export function unescapeOnce(text: string): string | null {
  const out = new Uint16Array(text.length);
  const n = unescapeInto(text, out, null);
  return n === -1 ? null : fromCodeUnits(out, n);
}

/** The same, with where in `text` each character of the result began (`from[length]` is the end). */
export function unescapeMapped(text: string): { text: string; from: Int32Array } {
  const out = new Uint16Array(text.length);
  const from = new Int32Array(text.length + 1);
  const n = unescapeInto(text, out, from);
  if (n === -1) return { text, from: from.map((_, i) => i) };
  return { text: fromCodeUnits(out, n), from: from.subarray(0, n + 1) };
}

/**
 * The spans of `text` whose JSON escapes, undone once, twice, … up to `levels` times, spell
 * something `find` finds in that view (`[start, end, tag]` in the view's offsets), as
 * `[start, end)` offsets in `text` covering whole escapes, sorted by start. The views are built
 * as text first (one cheap pass each); where each character came from is worked out only up
 * to the deepest view with a find.
 */
export function spansBehindEscapes<T>(text: string, levels: number, find: (view: string) => Array<[number, number, T]>): Array<{ start: number; end: number; tag: T }> {
  const finds: Array<Array<[number, number, T]>> = [];
  for (let current: string | null = text; finds.length < levels && current.includes('\\'); ) {
    current = unescapeOnce(current);
    if (current === null) break;
    finds.push(find(current));
  }
  let last = finds.length - 1;
  while (last >= 0 && finds[last]!.length === 0) last--;
  if (last === -1) return [];
  const spans: Array<{ start: number; end: number; tag: T }> = [];
  let current = text;
  let from: Int32Array | null = null; // where each character of `current` began in `text`
  for (let level = 0; level <= last; level++) {
    const view = unescapeMapped(current);
    const outer: Int32Array | null = from;
    const composed: Int32Array = outer ? view.from.map((i) => outer[i]!) : view.from;
    for (const [start, end, tag] of finds[level]!) spans.push({ start: composed[start]!, end: composed[end]!, tag });
    current = view.text;
    from = composed;
  }
  return spans.sort((a, b) => a.start - b.start);
}

/**
 * Text from the daemon on its way to a terminal (svc's tables, event lines and errors, and the
 * inbox): one line, and no escape sequence can get through; cut, padded and wrapped by the
 * columns it takes on screen.
 */
import { createRequire } from 'node:module';
import { visibleJson } from '../src/encoding/visible-json.js';

/**
 * Replaces C0/C1 control characters (ESC included) with `?`, newlines/tabs with a space, and
 * shows format characters and line/paragraph separators as `\u{…}`: a bidi override could
 * reorder what the approver reads, and a zero-width space makes `INV-\u200b2` look like `INV-2`.
 */
export function clean(value: unknown): string {
  const s = value === null || value === undefined ? '' : String(value);
  return (
    s
      .replace(/[\t\n\r]/g, ' ')
      // eslint-disable-next-line no-control-regex
      .replace(/[\u0000-\u001f\u007f-\u009f]/g, '?')
      .replace(/[\p{Cf}\p{Zl}\p{Zp}]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`)
  );
}

/**
 * string-width and the grapheme segmenter are made at their first use, not when the CLI starts:
 * string-width builds its own segmenter and Unicode tables as it loads (≈10 ms of `svc
 * --version`), and `svc --help` or an unreachable svcd measures no text (docs/design.md, "CLI
 * start-up"). Loaded with require(), which takes an ES module since Node 20.19 (package.json's
 * engines), since every caller is synchronous.
 */
let widthOf: typeof import('string-width').default | undefined;
function stringWidth(s: string): number {
  widthOf ??= (createRequire(import.meta.url)('string-width') as typeof import('string-width')).default;
  return widthOf(s);
}

let segmenter: Intl.Segmenter | undefined;
const graphemes = {
  segment: (s: string): Intl.Segments => (segmenter ??= new Intl.Segmenter(undefined, { granularity: 'grapheme' })).segment(s),
};

/**
 * Columns `s` takes on a terminal, as Ink counts them (string-width): CJK and emoji 2, combining
 * marks 0. Every cut and pad counts this, not characters: a line one column too wide wraps (in
 * the inbox, the screen then grows past the terminal and scrolls its header away), and a table
 * padded by characters leaves every column after a CJK cell out of line.
 */
export function columns(s: string): number {
  return stringWidth(s);
}

/** Cuts `s` to at most `width` columns, ending in `…` when cut, never inside a grapheme (a surrogate pair, a base and its combining marks, an emoji sequence). */
export function fit(s: string, width: number): string {
  if (width <= 0) return '';
  let used = 0;
  let cut = -1; // where the part that leaves a column for the `…` ends
  // Lazily, grapheme by grapheme: a long argument list is cut after `width` columns, not measured whole.
  for (const { segment, index } of graphemes.segment(s)) {
    const w = stringWidth(segment);
    if (cut < 0 && used + w > width - 1) cut = index;
    used += w;
    if (used > width) return s.slice(0, cut) + '…';
  }
  return s;
}

/** Cuts `s` to at most `width` columns keeping its end, starting with `…` when cut (a line being typed). */
export function fitEnd(s: string, width: number): string {
  if (width <= 0) return '';
  if (stringWidth(s) <= width) return s;
  const parts = Array.from(graphemes.segment(s), (g) => g.segment);
  let used = 1;
  let start = parts.length;
  while (start > 0 && used + stringWidth(parts[start - 1]!) <= width) used += stringWidth(parts[--start]!);
  return '…' + parts.slice(start).join('');
}

/** Pads `s` with spaces to at least `width` columns; never cuts (a table column as wide as its widest cell). */
export function pad(s: string, width: number): string {
  return s + ' '.repeat(Math.max(0, width - stringWidth(s)));
}

/** Pads or cuts to exactly `width` columns. */
export function cell(s: string, width: number): string {
  return pad(fit(s, width), width);
}

/**
 * Wraps one line of text into lines of at most `width` columns, breaking after a space or next to
 * a wide character (CJK text has no spaces) where it can, else between graphemes, on at most
 * `maxLines` lines: when more would be needed, the last one ends in `…` and `cut` is true.
 */
export function wrap(s: string, width: number, maxLines = Infinity): { lines: string[]; cut: boolean } {
  if (width <= 0 || maxLines <= 0) return { lines: [], cut: s.length > 0 };
  const lines: string[] = [];
  let line = '';
  let used = 0;
  let breakAt = -1; // where in `line` it may last break (after a space, around a wide character)
  let usedAtBreak = 0;
  // Lazily: a 4096-character reason shown on 15 lines is not measured past them.
  for (const { segment } of graphemes.segment(s)) {
    const w = stringWidth(segment);
    // `used > 0`: a grapheme wider than the whole width (a CJK character in one column) takes a line of its own.
    while (used + w > width && used > 0) {
      if (lines.length === maxLines - 1) return { lines: [...lines, used < width ? line + '…' : fit(line + '…', width)], cut: true };
      if (segment === ' ') {
        // The space at the edge ends the line, and the next one does not start with it.
        lines.push(line.trimEnd());
        line = '';
        used = 0;
        breakAt = -1;
        break;
      }
      if (breakAt > 0) {
        lines.push(line.slice(0, breakAt).trimEnd());
        line = line.slice(breakAt);
        used -= usedAtBreak;
      } else {
        lines.push(line);
        line = '';
        used = 0;
      }
      breakAt = -1;
    }
    if (segment === ' ' && used === 0) continue;
    if (w > 1 && used > 0) {
      breakAt = line.length;
      usedAtBreak = used;
    }
    line += segment;
    used += w;
    if (segment === ' ' || w > 1) {
      breakAt = line.length;
      usedAtBreak = used;
    }
  }
  if (line) lines.push(line);
  return { lines, cut: false };
}

/**
 * JSON for a person's terminal (`svc run show`'s output, `svc gateway call`'s result): as
 * JSON.stringify writes it, with C1 controls, format characters and line separators written
 * as `\uXXXX` escapes too (visibleJson). Still the same JSON, but nothing in it moves the
 * cursor, clears the screen or makes one value read as another.
 */
export function terminalJson(value: unknown, indent = 2): string {
  return visibleJson(JSON.stringify(value, null, indent) ?? String(value));
}

/**
 * A text of many lines for a terminal (`svc policy show`'s source, `svc bundle show`'s YAML,
 * every human output): lines, tabs and CRLF endings kept, every other control character `?`
 * (a lone CR would let `allow all\r# note` show as the note), format characters and line
 * separators `\u{…}` as in `clean`. A text without them is returned as it is.
 */
export function cleanText(s: string): string {
  return (
    s
      // eslint-disable-next-line no-control-regex
      .replace(/\r(?!\n)|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g, '?')
      .replace(/[\p{Cf}\p{Zl}\p{Zp}]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`)
  );
}

/** `clean` line by line: a message of several lines keeps its lines and nothing else. */
export function cleanLines(s: string): string {
  return s.split('\n').map(clean).join('\n');
}

/**
 * Reading JSON text exactly, for the data boundary (src/worker/data-boundary.ts): a parse may
 * stand in for the text it was read from only when it holds what the text holds. Pure; every
 * scan is one pass and iterative (hostile text cannot exhaust the stack).
 */
import { integerReadAs, jsonNumberEnd, jsonStringEnd, MemberNames } from '../encoding/json-limits.js';

const WS = /\s/;
/** A JSON number token as RFC 8259 spells it (any length: 1e400 and 70 digits are JSON too). */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
/** Prefixes servers put before JSON against cross-site script inclusion (XSSI). */
const XSSI_PREFIXES = [")]}'", 'while(1);', 'for(;;);'];

function skipSpace(text: string, at: number): number {
  while (at < text.length && WS.test(text[at]!)) at++; // \s includes U+FEFF, the byte order mark
  return at;
}

/**
 * Where the JSON in `text` starts: past whitespace, a byte order mark, and a known XSSI
 * prefix (`)]}'` with an optional comma, `while(1);`, `for(;;);`). -1 when what follows does
 * not open an object or an array as JSON does (`{"`, `{}`, `[{`, `[1`, `["`, `[true`, …):
 * `[System] …` or `{{name}}` is prose, not JSON text.
 */
export function jsonStart(text: string): number {
  let at = skipSpace(text, 0);
  for (const prefix of XSSI_PREFIXES) {
    if (text.startsWith(prefix, at)) {
      at += prefix.length;
      if (prefix === ")]}'" && text[at] === ',') at++;
      at = skipSpace(text, at);
      break;
    }
  }
  const open = text[at];
  if (open !== '{' && open !== '[') return -1;
  const next = skipSpace(text, at + 1);
  if (next >= text.length) return at; // `{` cut short: JSON text, truncated
  const c = text[next]!;
  if (open === '{') return c === '"' || c === '}' ? at : -1;
  if ('{["]'.includes(c)) return at;
  if (c === '-' || (c >= '0' && c <= '9')) {
    // A number, then `,` or `]`: `[1, 2]` is JSON, `[2024-05-01 12:00] INFO …` a log line.
    const { end } = jsonNumberEnd(text, next);
    if (!JSON_NUMBER.test(text.slice(next, end))) return -1; // `2024-05-01` is no number
    const after = skipSpace(text, end);
    return after >= text.length || text[after] === ',' || text[after] === ']' ? at : -1;
  }
  return text.startsWith('true', next) || text.startsWith('false', next) || text.startsWith('null', next) ? at : -1;
}

/** What a scan of valid JSON text finds that JSON.parse would not carry over exactly. */
interface Scan {
  /** [start, end) of each number literal a double does not hold as written. */
  inexact: Array<[number, number]>;
  /** A member name repeated in one object (JSON.parse keeps the last value only). */
  duplicate: boolean;
}

/**
 * A number literal JSON.parse would change: an integer past 2^53 (`1466000000000000001`, a
 * 19-digit card number), a longer decimal, one out of range (`1e400` reads as Infinity, which
 * JSON writes as null; `1e-400` as 0). An integer of up to 15 digits always fits.
 */
function inexactNumber(literal: string, integer: boolean): boolean {
  if (integer && literal.length <= 15) return false;
  const read = Number(literal);
  if (!Number.isFinite(read)) return true;
  if (read === 0) return /[1-9]/.test(literal.replace(/[eE].*$/, '')); // underflow
  if (literal.length <= 15) return false;
  return integer ? integerReadAs(literal) !== null : String(read) !== literal;
}

/** `text` must be valid JSON (run after JSON.parse). Stops at the first repeated name. */
function scan(text: string): Scan {
  const inexact: Array<[number, number]> = [];
  // One frame per open object (the names seen) or array (null).
  const frames: Array<MemberNames | null> = [];
  let expectName = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const { end: j, escaped } = jsonStringEnd(text, i);
      if (expectName) {
        const name = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        if (!frames[frames.length - 1]!.add(name)) return { inexact, duplicate: true };
        expectName = false;
      }
      i = j;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      const { end: j, integer } = jsonNumberEnd(text, i);
      if ((j - i > 15 || !integer) && inexactNumber(text.slice(i, j), integer)) inexact.push([i, j]);
      i = j - 1;
    } else if (c === 0x7b /* { */) {
      frames.push(new MemberNames());
      expectName = true;
    } else if (c === 0x5b /* [ */) {
      frames.push(null);
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      frames.pop();
      expectName = false;
    } else if (c === 0x2c /* , */) {
      expectName = frames[frames.length - 1] !== null;
    }
  }
  return { inexact, duplicate: false };
}

/** JSON text read exactly, or what was in the way of that. */
export interface ExactParse {
  /**
   * The value, with every number JSON.parse would change (see inexactNumber) kept as the
   * string of its literal, so nothing is rounded away (a 19-digit card number stays 19 digits
   * for the card detector). Written back, such numbers become strings.
   */
  value: unknown;
  /** A member name appears twice in one object: `value` lacks the first one's value. */
  duplicate: boolean;
}

/**
 * `text` parsed without loss (see ExactParse), or null when it is not one JSON text. Lone
 * surrogates (`"\ud83d"`, an emoji cut in two) need nothing: JSON.parse keeps the code unit
 * and JSON.stringify writes it back as the same escape.
 */
export function parseExact(text: string): ExactParse | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const found = scan(text);
  if (found.duplicate || found.inexact.length === 0) return { value, duplicate: found.duplicate };
  const parts: string[] = [];
  let at = 0;
  for (const [start, end] of found.inexact) {
    parts.push(text.slice(at, start), '"', text.slice(start, end), '"');
    at = end;
  }
  parts.push(text.slice(at));
  return { value: JSON.parse(parts.join('')), duplicate: false };
}

/**
 * Bounds on request bodies both listeners parse (decisions §10: no input yields a 500).
 * - A body nested thousands of levels deep parses fine but overflows the stack of every
 *   recursive walk after it (canonical hashing, redaction, serialisation).
 * - A number too large for a double (`1e400`) parses to Infinity, which JSON cannot carry back
 *   and canonical JSON (RFC 8785) refuses: the arguments hash would throw.
 * Both are refused up front as 400 `request_invalid` with `details.path`.
 */
import { shortened } from './cut-text.js';
import { pointerToken } from './json-pointer.js';
import { hasLoneSurrogate } from './well-formed-json.js';

/** Deepest nesting of objects and arrays accepted in a request body. */
export const MAX_BODY_DEPTH = 64;

export interface BodyProblem {
  /** JSON pointer of the offending value. */
  path: string;
  message: string;
}


/**
 * The first value of a parsed JSON body svc cannot work with: nested deeper than `max`
 * levels (the body itself is level 1 when it is an object or array), or a number that is not
 * finite. Null when there is none. Iterative, so it cannot overflow the stack itself.
 */
export function bodyProblem(value: unknown, max: number = MAX_BODY_DEPTH): BodyProblem | null {
  return firstProblem(value, max, true, 'request body');
}

/**
 * The first place a value from upstream (a tool's result) is nested deeper than `max`
 * levels, or null. Such a result would overflow the recursive walks after it (redaction,
 * serialisation); numbers need no check, since JSON.stringify writes Infinity as null.
 */
export function depthProblem(value: unknown, max: number, what: string): BodyProblem | null {
  return firstProblem(value, max, false, what);
}

function firstProblem(value: unknown, max: number, numbers: boolean, what: string): BodyProblem | null {
  // Depth first, in document order, one frame per open object or array (not per value) and no
  // path built until a problem is found: a body of a million small values (an 8 MiB bundle)
  // took seconds of the event loop and hundreds of MB when every value carried its own frame
  // and pointer string, starving every other request (health, heartbeats) meanwhile.
  const frames: Array<{ node: Record<string, unknown> | unknown[]; keys: string[] | null; i: number }> = [];
  const keys: Array<string | number> = []; // the key of each open container but the outermost
  const here = (key: string | number | null) => pointerOf((key === null ? keys : [...keys, key]).map(String));
  let v: unknown = value;
  let key: string | number | null = null;
  for (;;) {
    if (numbers && typeof v === 'number' && !Number.isFinite(v)) {
      const path = here(key);
      return { path, message: `${path || '/'} is a number out of range` };
    }
    if (v !== null && typeof v === 'object') {
      if (frames.length + 1 > max) {
        const path = here(key);
        return { path, message: `${what} is nested deeper than ${max} levels at ${path || '/'}` };
      }
      frames.push({ node: v as Record<string, unknown> | unknown[], keys: Array.isArray(v) ? null : Object.keys(v), i: 0 });
      if (key !== null) keys.push(key);
    }
    // The next value: the top container's next member, or its parent's once it has none left.
    for (;;) {
      const top = frames[frames.length - 1];
      if (top === undefined) return null;
      if (top.keys === null) {
        const list = top.node as unknown[];
        if (top.i < list.length) {
          key = top.i;
          v = list[top.i++];
          break;
        }
      } else if (top.i < top.keys.length) {
        key = top.keys[top.i++]!;
        v = (top.node as Record<string, unknown>)[key];
        break;
      }
      frames.pop();
      if (frames.length > 0) keys.pop();
    }
  }
}

function pointerOf(segments: string[]): string {
  return segments.map((s) => '/' + pointerToken(s)).join('');
}

function duplicate(where: string, name: string): BodyProblem {
  // A name can be a megabyte long: the answer names it in short, like an unknown route.
  return { path: shortened(where, 1024), message: `${shortened(where, 200)}: member "${shortened(name, 64)}" appears twice in one object` };
}

/**
 * The number an integer literal is read as when reading it changes it, else null. A literal
 * is kept when the double holds it exactly, or when it is how JSON.stringify writes that
 * double (`37373537320439930`): every JavaScript producer writes those, and reading and
 * writing them again gives the same text. What is left (`9007199254740993`, an int64 id from
 * another language) would be stored, hashed and passed on as another number.
 */
export function integerReadAs(literal: string): number | null {
  const read = Number(literal);
  if (!Number.isFinite(read)) return null; // out of range: bodyProblem's "number out of range"
  if (BigInt(literal) === BigInt(read) || String(read) === literal) return null;
  return read;
}

function inexactInteger(where: string, literal: string, read: number): BodyProblem {
  const shown = shortened(literal, 40);
  // No "send it as a string": the body reader does not know whether the field takes text
  // (a tool's id argument may; a remit's spend.tokens does not, and would refuse it next).
  return { path: where, message: `the integer ${shown} at ${where || '/'} is past what a JSON number holds exactly (it would be read as ${read}); integers up to 9007199254740991 are exact, and where a field takes text it can carry the digits as a string` };
}

function loneSurrogate(where: string, what: string): BodyProblem {
  return { path: where, message: `${what} ${where || '/'} holds a lone surrogate (\\ud800 to \\udfff without its pair), which canonical JSON cannot carry` };
}

/**
 * Where the string token opening at `text[i]` (a `"`) ends: the index of its closing quote, and
 * whether it holds an escape (read with JSON.parse then; else sliced as it stands).
 */
export function jsonStringEnd(text: string, i: number): { end: number; escaped: boolean } {
  let j = i + 1;
  let escaped = false;
  for (; j < text.length; j++) {
    const d = text.charCodeAt(j);
    if (d === 0x5c /* \ */) {
      escaped = true;
      j++;
    } else if (d === 0x22) break;
  }
  return { end: j, escaped };
}

/** Where the number token starting at `text[i]` ends (exclusive), and whether it is an integer. */
export function jsonNumberEnd(text: string, i: number): { end: number; integer: boolean } {
  let j = i + 1;
  let integer = true;
  for (; j < text.length; j++) {
    const d = text.charCodeAt(j);
    if (d >= 0x30 && d <= 0x39) continue;
    if (d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d) integer = false;
    else break;
  }
  return { end: j, integer };
}

/**
 * The member names met so far in one open object of a JSON text, to find one repeated. Most
 * objects (request bodies, upstream answers) have a handful of members, where a list beats a
 * Set; a large one moves to a Set so a scan stays linear.
 */
export class MemberNames {
  private few: string[] = [];
  private many: Set<string> | null = null;

  /** Notes `name`; false when this object already had it. */
  add(name: string): boolean {
    if (this.many !== null) {
      if (this.many.has(name)) return false;
      this.many.add(name);
      return true;
    }
    if (this.few.includes(name)) return false;
    this.few.push(name);
    if (this.few.length === 16) this.many = new Set(this.few);
    return true;
  }
}

/**
 * The first place a JSON text is not I-JSON (RFC 7493), which RFC 8785 canonical JSON (the
 * signed bytes of bundles and remits, the event hashes; decisions §1) assumes: a member name
 * repeated in one object, a string holding a lone surrogate (`"\ud800"`), or an integer a
 * double cannot hold exactly (`9007199254740993`, read as ...992: a tool called with another
 * id than the one sent, say). JSON.parse keeps the last of repeated names, so a signer or a
 * reviewer whose parser keeps the first would read another document than the one svc stores
 * and hashes. Null when there is none.
 *
 * `text` must already be valid JSON (run after JSON.parse). One pass; strings without escapes
 * are only sliced when they are member names.
 */
export function textProblem(text: string): BodyProblem | null {
  // One frame per open object or array: the names seen, or null for an array.
  const names: Array<MemberNames | null> = [];
  const path: string[] = [];
  const index: number[] = [];
  let expectName = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const { end: j, escaped } = jsonStringEnd(text, i);
      const value = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : null;
      if (expectName) {
        const name = value ?? text.slice(i + 1, j);
        const where = () => pointerOf([...path.slice(0, -1), name]);
        if (value !== null && hasLoneSurrogate(value)) return loneSurrogate(where(), 'the member name at');
        if (!names[names.length - 1]!.add(name)) return duplicate(where(), name);
        path[path.length - 1] = name;
        expectName = false;
      } else if (value !== null && hasLoneSurrogate(value)) {
        return loneSurrogate(pointerOf(path), 'the string at');
      }
      i = j;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      const { end: j, integer } = jsonNumberEnd(text, i);
      // Up to 15 digits always fit a double exactly; a longer integer is checked.
      if (integer && j - i > 15) {
        const literal = text.slice(i, j);
        const read = integerReadAs(literal);
        if (read !== null) return inexactInteger(pointerOf(path), literal, read);
      }
      i = j - 1;
    } else if (c === 0x7b /* { */) {
      names.push(new MemberNames());
      path.push('');
      index.push(-1);
      expectName = true;
    } else if (c === 0x5b /* [ */) {
      names.push(null);
      path.push('0');
      index.push(0);
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      names.pop();
      path.pop();
      index.pop();
      expectName = false; // `{}` closes before any name came
    } else if (c === 0x2c /* , */) {
      const top = names.length - 1;
      if (names[top] === null) path[top] = String(++index[top]!);
      else expectName = true;
    }
  }
  return null;
}

/**
 * Greatest nesting depth of containers in JSON text (a top-level object is depth 1). Scans
 * the text instead of recursing over a parsed value, so hostile input cannot exhaust the stack.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) max = depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

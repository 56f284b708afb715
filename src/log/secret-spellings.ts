/**
 * The spellings a secret takes on its way out, each registered with the redactor once, when the
 * secret is (a gateway `${VAR}` value, a provider's API key), so that redacting a text stays
 * one pass over it (src/log/secret-matcher.ts). What is covered and why the rest is not:
 * docs/design.md (Secrets) and svc-gateway(5), SECRETS.
 */
import { pointerToken } from '../encoding/json-pointer.js';
import { MIN_SECRET_LENGTH, type Redactor } from './logger.js';

/**
 * Spellings made of other characters than the value's own (base64, hex) are registered only for
 * values of this many UTF-8 bytes or more, the value in any letter case only for values of this
 * many characters or more. A base64 core then holds at least 10 characters (60 of the value's 64 bits, wherever it sits in the encoded
 * bytes) and hex 16 digits: unrelated text shows them by chance about once in 2^60 places. A
 * shorter value's core is 4 to 9 characters, which a megabyte of base64 shows by chance; and
 * the other case of a short value is too often an ordinary word (`Admin`, `admin`).
 */
export const MIN_TRANSFORMED_SECRET_BYTES = 8;

/**
 * Registers a secret with the spellings it takes on its way out: JSON-escaped once (a string
 * field, a log line) and twice (JSON text inside a string field, such as an http `body` or
 * an MCP text block that prints a JSON document), and percent-encoded as a URL component,
 * as a form or query value, and as the WHATWG URL parser writes it in a query, a path or
 * userinfo (an upstream echoing the URL it was called with, or redirecting to one), each in
 * upper- and lower-case hex, and with every byte percent-encoded; as a JSON pointer token (a
 * map key in a config problem's path); HTML-escaped (its markup characters as named or numeric
 * entities, or every character a numeric entity); in each Unicode normalization form (an
 * upstream that normalizes what it echoes: NFC, NFD, NFKC, NFKD). The value trimmed too: a
 * header is sent without its leading and trailing whitespace, and secrets read from files
 * often end in a newline. For a value of MIN_TRANSFORMED_SECRET_BYTES or more, besides: hex, and
 * base64 wherever it sits in the encoded bytes; and of as many characters, every textual
 * spelling in any letter case (an upstream that upper-cases what it quotes). (A shorter value's lower-cased spelling is not
 * registered: it would redact every case variant of a value such as a user name in every
 * output; the http connector checks the one place HTTP lower-cases, response header names,
 * itself, and a host of `allowed_hosts` that shows a value is registered lower-cased whole.)
 */
export function registerSecret(redactor: Redactor, value: string): void {
  const forms = new Set([value, value.trim()].flatMap((v) => [v, v.normalize('NFC'), v.normalize('NFD'), v.normalize('NFKC'), v.normalize('NFKD')]));
  for (const v of forms) {
    // Too short to be a secret (svc-gateway(5)), however it is spelt.
    if (v.length < MIN_SECRET_LENGTH) continue;
    const long = Buffer.byteLength(v, 'utf8') >= MIN_TRANSFORMED_SECRET_BYTES;
    // Any case by characters, not bytes: `Иван` is 8 bytes, and as often an ordinary word as `Admin`.
    const cased = [...v].length >= MIN_TRANSFORMED_SECRET_BYTES;
    const once = JSON.stringify(v).slice(1, -1);
    const twice = JSON.stringify(once).slice(1, -1);
    const form = new URLSearchParams([['', v]]).toString().slice(1);
    // pointerToken: a map key as a config problem's path spells it (a/b is a~1b).
    const narrow = [v, once, twice, encodeURIComponent(v), form, pointerToken(v), ...urlSpellings(v), ...latin1Spellings(v), ...htmlSpellings(v)];
    const textual = [...narrow, ...narrow.map(lowerHexEscapes), ...narrow.flatMap(wideSpellings)];
    // ß upper-cases to SS: the other case letter by letter would miss it.
    if (cased) textual.push(v.toUpperCase());
    for (const spelling of new Set(textual)) redactor.add(spelling, cased);
    // Hex digits and entity markers only: any case is the same bytes (`%6b`, `&#X6B;`).
    for (const spelling of byteSpellings(v, long)) redactor.add(spelling, true);
    if (long) for (const spelling of new Set([v, v.toUpperCase(), v.toLowerCase()].flatMap(base64Spellings))) redactor.add(spelling, false);
  }
}

/** `%2f` for `%2F`: encoders differ in the case of their hex digits (Go and Python write upper, some lower). */
function lowerHexEscapes(s: string): string {
  return s.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase());
}

/**
 * The value spelt byte by byte or character by character in escapes: every UTF-8 byte
 * percent-encoded (an encoder that encodes all), every character an HTML numeric entity in
 * decimal and in hex (a template escaping all it prints), and for a long value its UTF-8 bytes
 * in hex (a debug dump of the request).
 */
function byteSpellings(v: string, long: boolean): string[] {
  const bytes = Buffer.from(v, 'utf8');
  const chars = [...v].map((c) => c.codePointAt(0)!);
  const out = [[...bytes].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''), chars.map((c) => `&#${c};`).join(''), chars.map((c) => `&#x${c.toString(16)};`).join('')];
  if (long) out.push(bytes.toString('hex'));
  return out;
}

/**
 * How HTML escapers write a value with markup characters: `&` `<` `>` as named entities, the
 * quotes and `/` as named or numeric ones or left as they are (escapers differ; OWASP's rule
 * writes `&#x27;` and `&#x2F;`), characters past ASCII as numeric entities (decimal and hex)
 * or as they are; and, as encoders for attributes do, everything but ASCII letters and digits
 * as numeric entities.
 */
function htmlSpellings(v: string): string[] {
  if (!/[&<>"'/\u0080-\uffff]/.test(v)) return [];
  const markup = v.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  const out = new Set<string>();
  for (const dq of ['&quot;', '&#34;', '&#x22;', '"']) {
    for (const sq of ['&#39;', '&#x27;', '&apos;', "'"]) {
      for (const slash of ['/', '&#x2F;', '&#47;']) {
        const quoted = markup.replaceAll('"', dq).replaceAll("'", sq).replaceAll('/', slash);
        out.add(quoted);
        out.add(quoted.replace(/[^\x00-\x7f]/gu, (c) => `&#${c.codePointAt(0)};`));
        out.add(quoted.replace(/[^\x00-\x7f]/gu, (c) => `&#x${c.codePointAt(0)!.toString(16)};`));
      }
    }
  }
  out.add(v.replace(/[^A-Za-z0-9]/gu, (c) => `&#${c.codePointAt(0)};`));
  out.add(v.replace(/[^A-Za-z0-9]/gu, (c) => `&#x${c.codePointAt(0)!.toString(16)};`));
  out.delete(v);
  return [...out];
}

/**
 * How a value with characters U+0080 to U+00FF reads when its Latin-1 bytes are read as UTF-8:
 * fetch sends a header value so, one byte a character (`sëcret` as s, 0xEB, c, …), and an
 * upstream that echoes those bytes in a UTF-8 body shows `s\uFFFDcret`, every other character
 * of the value in the clear. As is and JSON-escaped once (a string field).
 */
function latin1Spellings(v: string): string[] {
  if (!/[\x80-\xff]/.test(v) || !/^[\x00-\xff]+$/.test(v)) return [];
  const read = Buffer.from(v, 'latin1').toString('utf8');
  return [read, JSON.stringify(read).slice(1, -1)];
}

/**
 * How a spelling reads when UTF-16 or UTF-32 bytes are read as UTF-8 or Latin-1 (a file saved by
 * Windows PowerShell, an upstream's mislabelled body, an MCP server's wide text): each
 * character followed by one or three NULs, either byte order alike between the first and the
 * last character. Only for a value of one-byte characters, the case such readings keep whole.
 */
function wideSpellings(v: string): string[] {
  const chars = [...v];
  // Too short to be a secret (svc-gateway(5)): its NUL-joined spelling would be long enough.
  if (chars.length < 4 || !/^[\x01-\xff]+$/.test(v)) return [];
  return [chars.join('\u0000'), chars.join('\u0000\u0000\u0000')];
}

/**
 * The base64 and base64url characters that spell a value wherever it sits in encoded bytes (an
 * upstream echoing a header base64-encoded, a Basic credential `user:password`, a sqlite BLOB
 * the gateway hands on as base64): at each of the three offsets a value can start at within a
 * 3-byte group, the characters made of its bits alone (MIN_TRANSFORMED_SECRET_BYTES says for
 * which values).
 */
function base64Spellings(v: string): string[] {
  const bytes = Buffer.from(v, 'utf8');
  const out: string[] = [];
  for (let shift = 0; shift < 3; shift++) {
    const encoded = Buffer.concat([Buffer.alloc(shift), bytes]).toString('base64');
    // Character i holds bits [6i, 6i + 6); the value's bits are [8·shift, 8·(shift + length)).
    const core = encoded.slice(Math.ceil((8 * shift) / 6), Math.floor((8 * (shift + bytes.length)) / 6));
    out.push(core, core.replaceAll('+', '-').replaceAll('/', '_'));
  }
  return out;
}

/**
 * How `new URL()` writes a value in a query, in a path and in userinfo (none is
 * encodeURIComponent's): an upstream redirecting to `http://user:<value>@host/` hands on a
 * Location so spelt.
 */
function urlSpellings(v: string): string[] {
  try {
    const userinfo = new URL('http://h/');
    userinfo.password = v;
    return [new URL(`http://h/?${v}`).search.slice(1), new URL(`http://h/${v}`).pathname.slice(1), userinfo.password];
  } catch {
    return [];
  }
}

/**
 * HTTP field syntax (RFC 9110 §5.1, §5.5) as fetch enforces it when it sends a request: a
 * name is a token; a value holds tabs, spaces, visible ASCII and bytes 0x80–0xFF (obs-text,
 * sent as Latin-1), nothing else, once stripped as fetch strips it. `new Headers()` alone lets control characters through that
 * the request then fails on, and refuses characters over 0xFF with a TypeError.
 */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export function validHeaderName(name: string): boolean {
  return TOKEN.test(name);
}

/**
 * True when fetch can send `value`, which it first strips of leading and trailing HTTP
 * whitespace (tab, space, CR, LF: a secret read from a file ends in a newline).
 */
export function validHeaderValue(value: string): boolean {
  return FIELD_VALUE.test(value.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, ''));
}

/**
 * Why a listener's bearer token could never be matched, or null. Clients send it in the
 * Authorization header, which HTTP strips of surrounding whitespace and cannot carry control
 * characters in; such a token would refuse every request. Never names the token.
 */
export function bearerTokenProblem(token: string): string | null {
  if (token !== token.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '')) return 'begins or ends with whitespace (a newline read from a file?), which no client can send in a header';
  if (!FIELD_VALUE.test(token)) return 'holds a character a header cannot carry (a control character, or one above U+00FF)';
  return null;
}

/**
 * JSON text with nothing in it that a terminal acts on or that hides or reorders text.
 * JSON.stringify escapes only C0 controls, quotes and backslashes; DEL and the C1 controls
 * (U+009B is CSI, the one-character form of ESC [), format characters (bidi overrides,
 * zero-width characters) and the line and paragraph separators pass as they are. Written as
 * `\uXXXX` escapes they are still the same JSON, since they only occur inside strings.
 */

/** The characters above, one at a time (svc bundle show's YAML escapes the same ones). */
// eslint-disable-next-line no-control-regex
export const INVISIBLE_CHARS = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]/gu;

/** `json` (JSON text) with the characters above written as `\uXXXX` escapes. */
export function visibleJson(json: string): string {
  return json.replace(INVISIBLE_CHARS, (c) => {
    let out = '';
    for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return out;
  });
}

/** A string quoted for a message, as JSON, with nothing invisible in it (`"\u202e"`). */
export function quoted(s: string): string {
  return visibleJson(JSON.stringify(s));
}

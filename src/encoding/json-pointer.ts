/** JSON Pointer (RFC 6901), the form every `details.path` and redaction path takes. */

/** One reference token escaped: `~` → `~0`, `/` → `~1`. */
export function pointerToken(key: string | number): string {
  return String(key).replace(/~/g, '~0').replace(/\//g, '~1');
}

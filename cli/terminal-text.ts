/**
 * Text from the daemon on its way to a terminal (svc's tables, event lines and errors, and the
 * inbox): one line, and no escape sequence can get through.
 */

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

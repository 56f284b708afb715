/**
 * Cutting text to a length counted in UTF-16 code units (what `.length` and `.slice` count)
 * without leaving half of a surrogate pair: `'😀'.slice(0, 1)` is a lone surrogate, which
 * svcd refuses in a body (not I-JSON) and svc's own clients replace with U+FFFD, so an emoji
 * at the cut would reach the reader as `�`. The cut is by code point, not grapheme, on
 * purpose: where the text is hashed (an action's summary is part of its id) the cut must not
 * move when a newer Node's Unicode tables group characters differently.
 */

/** `s` cut to at most `max` code units, one less when the cut would split a surrogate pair. */
export function cutText(s: string, max: number): string {
  if (s.length <= max) return s;
  if (max <= 0) return '';
  const last = s.charCodeAt(max - 1);
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** `s` as it is when at most `max` code units, else cut there (cutText) and marked with `…`. */
export function shortened(s: string, max: number): string {
  return s.length <= max ? s : `${cutText(s, max)}…`;
}

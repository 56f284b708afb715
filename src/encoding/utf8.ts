/**
 * Strict UTF-8: bytes decode to text only when they are valid UTF-8, with nothing replaced
 * and nothing dropped (a leading byte-order mark stays, since it is part of a name or payload).
 */
const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The text of `bytes`, or null when they are not valid UTF-8. */
export function decodeUtf8Strict(bytes: Uint8Array): string | null {
  try {
    return strict.decode(bytes);
  } catch {
    return null;
  }
}

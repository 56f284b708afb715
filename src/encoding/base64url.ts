/**
 * Strict base64url (RFC 4648 §5) without padding (decisions §1). The decoder refuses
 * padding, characters outside the alphabet, impossible lengths and non-canonical
 * trailing bits, so one byte string has exactly one encoding: tokens cannot be
 * malleated into a second spelling that verifies.
 */
const ALPHABET = /^[A-Za-z0-9_-]*$/;

export function encodeBase64url(bytes: Uint8Array | string): string {
  const buf = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return buf.toString('base64url');
}

/** Decodes strictly; returns null for anything that is not canonical unpadded base64url. */
export function decodeBase64url(text: string): Buffer | null {
  if (typeof text !== 'string' || !ALPHABET.test(text)) return null;
  if (text.length % 4 === 1) return null;
  const bytes = Buffer.from(text, 'base64url');
  // Re-encoding catches non-zero trailing bits ("AB" and "AC" decode alike).
  if (bytes.toString('base64url') !== text) return null;
  return bytes;
}

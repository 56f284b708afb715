/** Strict base64url, RFC 4648 §5 without padding (decisions §1). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeBase64url, encodeBase64url } from '../../src/encoding/base64url.js';

describe('base64url (D §1)', () => {
  it('encodes the RFC 4648 §10 vectors without padding', () => {
    const vectors: Array<[string, string]> = [['', ''], ['f', 'Zg'], ['fo', 'Zm8'], ['foo', 'Zm9v'], ['foob', 'Zm9vYg'], ['fooba', 'Zm9vYmE'], ['foobar', 'Zm9vYmFy']];
    for (const [plain, enc] of vectors) {
      expect(encodeBase64url(plain)).toBe(enc);
      expect(decodeBase64url(enc)?.toString('utf8')).toBe(plain);
    }
  });

  it('uses - and _ instead of + and /', () => {
    expect(encodeBase64url(Uint8Array.from([0xfb, 0xff]))).toBe('-_8');
    expect(decodeBase64url('-_8')).toEqual(Buffer.from([0xfb, 0xff]));
  });

  it('encodes a subarray view, not its whole buffer', () => {
    const buf = Buffer.from('xxfooxx');
    expect(encodeBase64url(buf.subarray(2, 5))).toBe('Zm9v');
  });

  const refused: Array<[string, string]> = [
    ['padding', 'Zg=='],
    ['single padding', 'Zm8='],
    ['standard alphabet +', '+/8'],
    ['standard alphabet /', 'ab/c'],
    ['whitespace', 'Zm9v Yg'],
    ['newline', 'Zm9v\n'],
    ['an impossible length (4n+1)', 'Zm9vY'],
    ['non-canonical trailing bits (Zh vs Zg)', 'Zh'],
    ['non-canonical trailing bits (Zm9 vs Zm8)', 'Zm9'],
    ['non-ASCII', 'Zm9vé'],
    ['a dot', 'Zm.v'],
  ];
  for (const [name, text] of refused) {
    it(`refuses ${name}`, () => {
      expect(decodeBase64url(text)).toBeNull();
    });
  }

  it('refuses non-strings', () => {
    expect(decodeBase64url(undefined as unknown as string)).toBeNull();
    expect(decodeBase64url(12 as unknown as string)).toBeNull();
  });

  it('round-trips every byte string, and each byte string has exactly one accepted spelling (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const text = encodeBase64url(bytes);
        expect(text).toMatch(/^[A-Za-z0-9_-]*$/);
        expect(decodeBase64url(text)).toEqual(Buffer.from(bytes));
      }),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (text) => {
        const bytes = decodeBase64url(text);
        if (bytes !== null) expect(encodeBase64url(bytes)).toBe(text);
      }),
    );
  });
});

/**
 * Publisher keys (decisions §2): `KEY_ID:PUBLIC_KEY` from config, --publisher and
 * SVC_PUBLISHERS; refusal of keys that are not 32 bytes, not a point, or of small order,
 * with an error naming the key.
 */
import { describe, expect, it } from 'vitest';
import { generateKeyPair } from '../../src/keys/ed25519.js';
import { generatePublisherKey, loadPublishers, parsePublisher, publisherKeyId } from '../../src/keys/publishers.js';

const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64url');

describe('parsePublisher / loadPublishers (D §2)', () => {
  it('parses KEY_ID:PUBLIC_KEY and looks keys up by id', () => {
    const a = generatePublisherKey();
    const b = generateKeyPair();
    const keys = loadPublishers([`${a.key_id}:${a.public_key}`, ` acme-2026:${b.publicKey.toString('base64url')} `]);
    expect(keys.size).toBe(2);
    expect(Buffer.from(keys.lookup(a.key_id)!).toString('base64url')).toBe(a.public_key);
    expect(Buffer.from(keys.lookup('acme-2026')!)).toEqual(b.publicKey);
    expect(keys.lookup('nobody')).toBeNull();
    expect(keys.list().map((k) => k.key_id)).toEqual([a.key_id, 'acme-2026']);
  });

  it('tolerates the same key configured twice, refuses one id with two keys', () => {
    const a = generatePublisherKey();
    expect(loadPublishers([`${a.key_id}:${a.public_key}`, `${a.key_id}:${a.public_key}`]).size).toBe(1);
    const other = generateKeyPair().publicKey.toString('base64url');
    expect(() => loadPublishers([`${a.key_id}:${a.public_key}`, `${a.key_id}:${other}`])).toThrow(new RegExp(`${a.key_id} is configured twice`));
  });

  const bad: Array<[string, string, RegExp]> = [
    ['small-order key (identity)', `idkey:${b64('01' + '00'.repeat(31))}`, /publisher key idkey: .*small-order/],
    ['small-order key (order 8)', `tors:${b64('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa')}`, /publisher key tors: .*small-order/],
    ['31-byte key', `short:${b64('11'.repeat(31))}`, /publisher key short: public key is 31 bytes/],
    ['33-byte key', `long:${b64('11'.repeat(33))}`, /publisher key long: public key is 33 bytes/],
    ['invalid point', `nopoint:${b64('02' + '00'.repeat(31))}`, /publisher key nopoint: .*not a valid Ed25519 point/],
    ['padded base64', `pad:${generateKeyPair().publicKey.toString('base64')}`, /publisher key pad: public key is not unpadded base64url/],
    ['empty key', 'empty:', /publisher key empty: public key is not unpadded base64url/],
    ['no colon', 'justtext', /must be KEY_ID:PUBLIC_KEY/],
    ['empty id', `:${generateKeyPair().publicKey.toString('base64url')}`, /must be KEY_ID:PUBLIC_KEY/],
    ['id with a space', `my key:${generateKeyPair().publicKey.toString('base64url')}`, /publisher key id "my key"/],
  ];
  // svcd(8) --publisher: the key file's path is the natural first try; the refusal names the
  // command that turns a key file into the argument.
  it('refuses a key file path, pointing at svc keys publisher', () => {
    expect(() => parsePublisher('publisher.json')).toThrow('publisher key "publisher.json" must be KEY_ID:PUBLIC_KEY (svc keys publisher KEYFILE prints it for a key file)');
  });
  for (const [name, spec, message] of bad) {
    it(`refuses a ${name}, naming it`, () => {
      expect(() => parsePublisher(spec)).toThrow(message);
      expect(() => loadPublishers([spec])).toThrow(message);
    });
  }

  it('reports every bad key at once', () => {
    expect(() => loadPublishers([`a:${b64('11'.repeat(31))}`, `b:${b64('01' + '00'.repeat(31))}`])).toThrow(/publisher key a: .*; publisher key b: /);
  });

  it('generated publisher keys: pub- ids derived from the public key', () => {
    const k = generatePublisherKey();
    expect(k.key_id).toBe(publisherKeyId(Buffer.from(k.public_key, 'base64url')));
    expect(k.key_id).toMatch(/^pub-[A-Za-z0-9_-]{16}$/);
    expect(() => parsePublisher(`${k.key_id}:${k.public_key}`)).not.toThrow();
  });
});

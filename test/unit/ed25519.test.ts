/**
 * Ed25519 (decisions §2): RFC 8032 §7.1 vectors and Wycheproof / "Taming the many EdDSAs"
 * cases through node:crypto (src/keys/ed25519.ts, the hot path) and @noble/ed25519, the
 * small-order and malformed-key refusal (publicKeyProblem), and control-plane key ids.
 */
import { createHash } from 'node:crypto';
import * as noble from '@noble/ed25519';
import { describe, expect, it } from 'vitest';
import { controlPlaneKeyId } from '../../src/keys/keyring.js';
import { generateKeyPair, keyPairFromSeed, publicKeyProblem, signBytes, verifyBytes } from '../../src/keys/ed25519.js';

const h = (x: string) => Buffer.from(x, 'hex');

// RFC 8032 §7.1 TEST 1, 2, 3 and TEST SHA(abc).
const RFC8032 = [
  {
    name: 'TEST 1 (empty message)',
    seed: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
    pk: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    msg: '',
    sig: 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
  },
  {
    name: 'TEST 2 (one byte)',
    seed: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
    pk: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
    msg: '72',
    sig: '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  },
  {
    name: 'TEST 3 (two bytes)',
    seed: 'c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7',
    pk: 'fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025',
    msg: 'af82',
    sig: '6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a',
  },
  {
    name: 'TEST SHA(abc)',
    seed: '833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42',
    pk: 'ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf',
    msg: 'ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f',
    sig: 'dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704',
  },
];

describe('RFC 8032 §7.1 vectors through node:crypto and noble (D §2)', () => {
  for (const v of RFC8032) {
    it(v.name, () => {
      const pair = keyPairFromSeed(h(v.seed));
      expect(pair.publicKey.toString('hex')).toBe(v.pk);
      expect(signBytes(h(v.seed), h(v.msg)).toString('hex')).toBe(v.sig);
      expect(verifyBytes(h(v.pk), h(v.msg), h(v.sig))).toBe(true);
      expect(Buffer.from(noble.getPublicKey(h(v.seed))).toString('hex')).toBe(v.pk);
      expect(Buffer.from(noble.sign(h(v.msg), h(v.seed))).toString('hex')).toBe(v.sig);
      expect(noble.verify(h(v.sig), h(v.msg), h(v.pk), { zip215: false })).toBe(true);
      expect(publicKeyProblem(h(v.pk))).toBeNull();
      const tampered = h(v.sig);
      tampered[0]! ^= 1;
      expect(verifyBytes(h(v.pk), h(v.msg), tampered)).toBe(false);
      expect(noble.verify(tampered, h(v.msg), h(v.pk))).toBe(false);
    });
  }
});

// Wycheproof ed25519_test.json: key add4bb81…, public key 7d4d0e7f…
const WY_PK = '7d4d0e7f6153a69b6242b522abbee685fda4420f8834b108c3bdae369ef549fa';
const WY_SEED = 'add4bb8103785baf9ac534258e8aaf65f5f1adb5ef5f3df19bb80ab989c4d64b';
const L = (1n << 252n) + 27742317777372353535851937790883648493n;

function leToBig(b: Uint8Array): bigint {
  let n = 0n;
  for (let i = b.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(b[i]!);
  return n;
}
function bigToLe(n: bigint, len = 32): Buffer {
  const out = Buffer.alloc(len);
  for (let i = 0; i < len; i++) {
    out[i] = Number(n & 0xffn);
    n >>= 8n;
  }
  return out;
}

describe('Wycheproof Ed25519 cases (D §2)', () => {
  it('tcId 1 and 3: valid signatures verify in both implementations', () => {
    expect(keyPairFromSeed(h(WY_SEED)).publicKey.toString('hex')).toBe(WY_PK);
    const valid = [
      ['', 'd4fbdb52bfa726b44d1786a8c0d171c3e62ca83c9e5bbe63de0bb2483f8fd6cc1429ab72cafc41ab56af02ff8fcc43b99bfe4c7ae940f60f38ebaa9d311c4007'],
      ['54657374', '7c38e026f29e14aabd059a0f2db8b0cd783040609a8be684db12f82a27774ab07a9155711ecfaf7f99f277bad0c6ae7e39d4eef676573336a5c51eb6f946b30d'],
    ];
    for (const [msg, sig] of valid) {
      expect(verifyBytes(h(WY_PK), h(msg!), h(sig!))).toBe(true);
      expect(noble.verify(h(sig!), h(msg!), h(WY_PK), { zip215: false })).toBe(true);
      expect(signBytes(h(WY_SEED), h(msg!)).toString('hex')).toBe(sig);
    }
  });

  it('tcId 63 (SignatureMalleability): S + L, a non-canonical S, is refused by both', () => {
    const good = h('7c38e026f29e14aabd059a0f2db8b0cd783040609a8be684db12f82a27774ab07a9155711ecfaf7f99f277bad0c6ae7e39d4eef676573336a5c51eb6f946b30d');
    const hostile = h('7c38e026f29e14aabd059a0f2db8b0cd783040609a8be684db12f82a27774ab067654bce3832c2d76f8f6f5dafc08d9339d4eef676573336a5c51eb6f946b31d');
    // The hostile signature is the valid one with S replaced by S + L.
    expect(leToBig(hostile.subarray(32))).toBe(leToBig(good.subarray(32)) + L);
    expect(verifyBytes(h(WY_PK), h('54657374'), hostile)).toBe(false);
    expect(noble.verify(hostile, h('54657374'), h(WY_PK))).toBe(false);
    expect(noble.verify(hostile, h('54657374'), h(WY_PK), { zip215: false })).toBe(false);
  });

  it('S + L on our own signatures is refused as well (no malleable second spelling)', () => {
    const pair = generateKeyPair();
    const msg = Buffer.from('{"rid":"rmt_x"}');
    const sig = signBytes(pair.seed, msg);
    const s = leToBig(sig.subarray(32)) + L;
    expect(s < 1n << 256n).toBe(true);
    const mall = Buffer.concat([sig.subarray(0, 32), bigToLe(s)]);
    expect(verifyBytes(pair.publicKey, msg, sig)).toBe(true);
    expect(verifyBytes(pair.publicKey, msg, mall)).toBe(false);
  });

  it('small-order public key: node:crypto accepts a forged signature, which is why such keys are refused where configured', () => {
    // "Taming the many EdDSAs" case 1: A and R of small order, S arbitrary.
    const pk = h('c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa');
    const msg = h('9bd9f44f4dcc75bd531b56b2cd280b0bb38fc1cd6d1230e14861d861de092e79');
    const sig = h('f7badec5b8abeaf699583992219b7b223f1df3fbbea919844e3f7c554a43dd43a5bb704786be79fc476f91d3f3f89b03984d8068dcf1bb7dfc6637b45450ac04');
    expect(verifyBytes(pk, msg, sig)).toBe(true); // the danger
    expect(noble.verify(sig, msg, pk, { zip215: false })).toBe(false);
    expect(publicKeyProblem(pk)).toMatch(/small-order/);
  });
});

describe('publicKeyProblem: the configured-key refusal (D §2)', () => {
  // The eight torsion points (small order), canonical encodings.
  const smallOrder = [
    '0100000000000000000000000000000000000000000000000000000000000000', // identity
    'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f', // order 2
    '0000000000000000000000000000000000000000000000000000000000000000', // order 4
    '0000000000000000000000000000000000000000000000000000000000000080', // order 4
    '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05', // order 8
    '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
    'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
    'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
  ];
  for (const pk of smallOrder) {
    it(`refuses small-order key ${pk.slice(0, 8)}…${pk.slice(-4)}`, () => {
      expect(publicKeyProblem(h(pk))).toMatch(/small-order/);
    });
  }
  it('refuses keys that are not 32 bytes', () => {
    expect(publicKeyProblem(Buffer.alloc(31, 1))).toMatch(/31 bytes/);
    expect(publicKeyProblem(Buffer.alloc(33, 1))).toMatch(/33 bytes/);
    expect(publicKeyProblem(Buffer.alloc(0))).toMatch(/0 bytes/);
  });
  it('refuses encodings that are not a valid point (no square root, y >= p)', () => {
    expect(publicKeyProblem(h('0200000000000000000000000000000000000000000000000000000000000000'))).toMatch(/not a valid/);
    expect(publicKeyProblem(h('edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'))).toMatch(/not a valid/);
  });
  it('accepts ordinary keys', () => {
    for (let i = 0; i < 20; i++) expect(publicKeyProblem(generateKeyPair().publicKey)).toBeNull();
  });
});

describe('key ids (D §2)', () => {
  it('cp- + first 16 chars of base64url(sha256(public key))', () => {
    const pk = h(RFC8032[0]!.pk);
    const expected = 'cp-' + createHash('sha256').update(pk).digest().toString('base64url').slice(0, 16);
    expect(controlPlaneKeyId(pk)).toBe(expected);
  });
});

/**
 * The control-plane signing key (decisions §2): created on first start in
 * `<data_dir>/keys/control-plane.json` (mode 0600) or loaded from SVC_SIGNING_KEY.
 * Retired keys stay trusted for verification and are published as `previous`.
 */
import { createHash, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeBase64url, encodeBase64url } from '../encoding/base64url.js';
import type { TrustedKeys } from '../types.js';
import { writeFileDurably } from '../util/durable-file.js';
import { generateKeyPair, keyPairFromSeed, privateKeyObject, publicKeyProblem, signBytes } from './ed25519.js';

/** `cp-` + first 16 chars of base64url(sha256(public key)). */
export function controlPlaneKeyId(publicKey: Uint8Array): string {
  return 'cp-' + encodeBase64url(createHash('sha256').update(publicKey).digest()).slice(0, 16);
}

export interface RetiredKey {
  key_id: string;
  public_key: string;
  retired_at: string;
}

interface KeyFile {
  key_id: string;
  public_key: string;
  private_key: string;
  created_at: string;
  previous: RetiredKey[];
}

/** GET /v1/keys body. */
export interface PublishedKeys {
  key_id: string;
  algorithm: 'ed25519';
  public_key: string;
  previous: RetiredKey[];
}

export class KeyRing implements TrustedKeys {
  readonly keyId: string;
  readonly publicKey: Buffer;
  private readonly signingKey: KeyObject;
  private readonly trusted = new Map<string, Uint8Array>();

  constructor(
    seed: Uint8Array,
    readonly previous: RetiredKey[] = [],
  ) {
    const pair = keyPairFromSeed(seed);
    this.publicKey = pair.publicKey;
    this.keyId = controlPlaneKeyId(pair.publicKey);
    this.signingKey = privateKeyObject(seed);
    this.trusted.set(this.keyId, this.publicKey);
    for (const p of previous) {
      // load() has named the file's problems (retiredKeys); this guards any other caller.
      const raw = decodeBase64url(p.public_key);
      const problem = raw ? publicKeyProblem(raw) : 'is not unpadded base64url';
      if (problem !== null) throw new Error(`retired key ${p.key_id}: public key ${problem}; refusing to trust it`);
      this.trusted.set(p.key_id, raw!);
    }
  }

  /** Loads the key from SVC_SIGNING_KEY (base64url seed) or the data dir, creating it on first start. */
  static load(dataDir: string, envSeed: string | undefined = process.env.SVC_SIGNING_KEY): KeyRing {
    const file = keyFilePath(dataDir);
    const stored = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as KeyFile) : null;
    if (envSeed) {
      const seed = decodeBase64url(envSeed.trim());
      if (!seed || seed.length !== 32) throw new Error('SVC_SIGNING_KEY must be base64url (no padding) of a 32-byte Ed25519 seed');
      return new KeyRing(seed, stored ? retiredKeys(file, stored.previous) : []);
    }
    if (stored) {
      const seed = decodeBase64url(stored.private_key);
      if (!seed || seed.length !== 32) throw new Error(`${file}: private_key is not a 32-byte base64url seed`);
      return new KeyRing(seed, retiredKeys(file, stored.previous));
    }
    const ring = new KeyRing(generateKeyPair().seed);
    ring.save(dataDir);
    return ring;
  }

  /**
   * Retires the current key (still trusted for verification) and writes a new one. Refused
   * when there is no key to retire (a mistyped data dir would otherwise get a fresh ring that
   * no svcd uses) and when SVC_SIGNING_KEY is set (svcd would keep signing with that key).
   */
  static rotate(dataDir: string, now: Date = new Date(), envSeed: string | undefined = process.env.SVC_SIGNING_KEY): KeyRing {
    if (envSeed) throw new Error('SVC_SIGNING_KEY is set: svcd signs with that key whatever the key file says; to rotate, unset it and rotate the key file, or set a new SVC_SIGNING_KEY');
    if (!existsSync(keyFilePath(dataDir))) throw new Error(`no control-plane key to rotate in ${keyFilePath(dataDir)} (is --data-dir the kernel's data directory?)`);
    const current = KeyRing.load(dataDir, undefined);
    const retired: RetiredKey = { key_id: current.keyId, public_key: encodeBase64url(current.publicKey), retired_at: now.toISOString() };
    const next = new KeyRing(generateKeyPair().seed, [retired, ...current.previous]);
    next.save(dataDir);
    return next;
  }

  lookup(keyId: string): Uint8Array | null {
    return this.trusted.get(keyId) ?? null;
  }

  sign(message: Uint8Array): Buffer {
    return signBytes(this.signingKey, message);
  }

  published(): PublishedKeys {
    return { key_id: this.keyId, algorithm: 'ed25519', public_key: encodeBase64url(this.publicKey), previous: this.previous };
  }

  private seedForSave(): Buffer {
    return Buffer.from(this.signingKey.export({ format: 'der', type: 'pkcs8' }).subarray(16));
  }

  private save(dataDir: string): void {
    const file = keyFilePath(dataDir);
    mkdirSync(join(dataDir, 'keys'), { recursive: true, mode: 0o700 });
    const body: KeyFile = {
      key_id: this.keyId,
      public_key: encodeBase64url(this.publicKey),
      private_key: encodeBase64url(this.seedForSave()),
      created_at: new Date().toISOString(),
      previous: this.previous,
    };
    writeFileDurably(file, JSON.stringify(body, null, 2) + '\n', 0o600);
  }
}

/**
 * The key file's `previous` list, checked as any configured key is (decisions §2): a
 * small-order key would verify every signature, so one slipped into the file (by hand, or by
 * whoever can write it) must stop svcd rather than be trusted. Each key id must also be the
 * one its public key derives, as `svcd keys rotate` writes it.
 */
export function retiredKeys(file: string, previous: unknown): RetiredKey[] {
  if (previous === undefined) return [];
  if (!Array.isArray(previous)) throw new Error(`${file}: previous must be a list of retired keys`);
  return previous.map((p: unknown, i): RetiredKey => {
    const where = `${file}: previous[${i}]`;
    const e = (p ?? {}) as Partial<RetiredKey>;
    if (typeof e.key_id !== 'string' || typeof e.public_key !== 'string' || typeof e.retired_at !== 'string') throw new Error(`${where} must have a key_id, a public_key and a retired_at`);
    const raw = decodeBase64url(e.public_key);
    if (!raw) throw new Error(`${where} (${e.key_id}): public_key is not unpadded base64url`);
    const problem = publicKeyProblem(raw);
    if (problem) throw new Error(`${where} (${e.key_id}): public key ${problem}; refusing to trust it`);
    if (e.key_id !== controlPlaneKeyId(raw)) throw new Error(`${where}: key_id ${e.key_id} is not the id of its public key (${controlPlaneKeyId(raw)})`);
    return { key_id: e.key_id, public_key: e.public_key, retired_at: e.retired_at };
  });
}

export function keyFilePath(dataDir: string): string {
  return join(dataDir, 'keys', 'control-plane.json');
}

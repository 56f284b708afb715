/**
 * The control-plane signing key (decisions §2): created on first start in
 * `<data_dir>/keys/control-plane.json` (mode 0600) or loaded from SVC_SIGNING_KEY.
 * Retired keys stay trusted for verification and are published as `previous`. While
 * SVC_SIGNING_KEY signs, the file's keys are among them (they signed the data dir's history),
 * and the file records the public part of each SVC_SIGNING_KEY value, never its seed, so a
 * later switch (to another value, or back to the file) still verifies what it signed.
 */
import { createHash, type KeyObject } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { ensureDir } from '../util/ensure-dir.js';
import { join } from 'node:path';
import { decodeBase64url, encodeBase64url } from '../encoding/base64url.js';
import { DataDirInUseError, lockDataDir } from '../store/dir-lock.js';
import { clearModeBits } from '../store/private-files.js';
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

/** The SVC_SIGNING_KEY svcd last started with on a data dir, as its key file records it: public part only. */
export interface EnvKeyRecord {
  key_id: string;
  public_key: string;
  /** When svcd began signing with SVC_SIGNING_KEY (any value) instead of the file's own key: that key's `retired_at` meanwhile. */
  since: string;
}

/**
 * `<data_dir>/keys/control-plane.json`. The file's own key (`key_id` … `created_at`) is absent
 * while svcd has only ever signed with SVC_SIGNING_KEY on the data dir; it is made on the
 * first start without the variable.
 */
interface KeyFile {
  key_id?: string;
  public_key?: string;
  private_key?: string;
  created_at?: string;
  previous: RetiredKey[];
  env_key?: EnvKeyRecord;
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
      // load() has named the file's problems (readKeyFile); this guards any other caller.
      const raw = decodeBase64url(p.public_key);
      const problem = raw ? publicKeyProblem(raw) : 'is not unpadded base64url';
      if (problem !== null) throw new Error(`retired key ${p.key_id}: public key ${problem}; refusing to trust it`);
      this.trusted.set(p.key_id, raw!);
    }
  }

  /**
   * Loads the key from SVC_SIGNING_KEY (base64url seed) or the data dir, creating it on first
   * start. With SVC_SIGNING_KEY, the key file's keys other than it are trusted for verification
   * only, and the file records the variable's public key (writing only when that changes).
   */
  static load(dataDir: string, envSeed: string | undefined = process.env.SVC_SIGNING_KEY, now: Date = new Date()): KeyRing {
    const env = envSeed ? seedFromEnv(envSeed) : null;
    const file = keyFilePath(dataDir);
    const first = planLoad(readKeyFile(file), env, now);
    if (first.write === null) return first.ring;
    // `svcd keys rotate` writes the file too: decide again on what it holds under the rotation's lock.
    const release = lockKeyDir(dataDir);
    try {
      const settled = planLoad(readKeyFile(file), env, now);
      if (settled.write !== null) writeKeyFile(dataDir, settled.write);
      return settled.ring;
    } finally {
      release();
    }
  }

  /**
   * Retires the current key (still trusted for verification) and writes a new one. Refused
   * when there is no key to retire (a mistyped data dir would otherwise get a fresh ring that
   * no svcd uses) and when SVC_SIGNING_KEY is set (svcd would keep signing with that key).
   */
  static rotate(dataDir: string, now: Date = new Date(), envSeed: string | undefined = process.env.SVC_SIGNING_KEY): KeyRing {
    if (envSeed) throw new Error('SVC_SIGNING_KEY is set: svcd signs with that key whatever the key file says; to rotate, unset it and rotate the key file, or set a new SVC_SIGNING_KEY');
    const file = keyFilePath(dataDir);
    const release = readKeyFile(file) === null ? null : lockKeyDir(dataDir);
    try {
      const stored = readKeyFile(file);
      if (stored === null) throw new Error(`no control-plane key to rotate in ${file} (is --data-dir the kernel's data directory?)`);
      if (stored.private_key === undefined) throw new Error(`no control-plane key to rotate in ${file}: svcd has only signed with SVC_SIGNING_KEY on this data dir (the file records its public key); start svcd once without it to create one`);
      const current = KeyRing.load(dataDir, undefined, now); // a recorded SVC_SIGNING_KEY goes under previous
      const retired: RetiredKey = { key_id: current.keyId, public_key: encodeBase64url(current.publicKey), retired_at: now.toISOString() };
      const pair = generateKeyPair();
      const body = fileKeyBody(pair.seed, now, [retired, ...readKeyFile(file)!.previous]);
      writeKeyFile(dataDir, body);
      return new KeyRing(pair.seed, newestFirst(body.previous));
    } finally {
      release?.();
    }
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
}

function seedFromEnv(envSeed: string): Uint8Array {
  const seed = decodeBase64url(envSeed.trim());
  if (!seed || seed.length !== 32) throw new Error('SVC_SIGNING_KEY must be base64url (no padding) of a 32-byte Ed25519 seed');
  return seed;
}

/**
 * What svcd signs and trusts given the key file (null: none yet) and SVC_SIGNING_KEY (null:
 * unset), and the file to write when it must change (null: it need not). Pure, so load() can
 * decide again under the lock.
 */
function planLoad(stored: KeyFile | null, env: Uint8Array | null, now: Date): { ring: KeyRing; write: KeyFile | null } {
  const at = now.toISOString();
  let body: KeyFile = stored ? structuredClone(stored) : { previous: [] };
  const before = stored ? JSON.stringify(body) : null;
  if (env !== null) {
    const pair = keyPairFromSeed(env);
    const id = controlPlaneKeyId(pair.publicKey);
    const recorded = body.env_key;
    if (recorded && recorded.key_id !== id) retire(body, recorded, at);
    body.previous = body.previous.filter((p) => p.key_id !== id); // it signs again
    if (id === body.key_id) delete body.env_key;
    else if (recorded?.key_id !== id) body.env_key = { key_id: id, public_key: encodeBase64url(pair.publicKey), since: recorded?.since ?? at };
    const previous = [...body.previous];
    if (body.key_id !== undefined && body.key_id !== id) previous.push({ key_id: body.key_id, public_key: body.public_key!, retired_at: body.env_key?.since ?? at });
    return { ring: new KeyRing(env, newestFirst(previous)), write: JSON.stringify(body) === before ? null : body };
  }
  if (body.env_key) {
    retire(body, body.env_key, at);
    delete body.env_key;
  }
  let seed: Uint8Array;
  if (body.private_key === undefined) {
    seed = generateKeyPair().seed;
    body = fileKeyBody(seed, now, body.previous);
  } else seed = decodeBase64url(body.private_key)!; // readKeyFile checked it
  return { ring: new KeyRing(seed, newestFirst(body.previous)), write: JSON.stringify(body) === before ? null : body };
}

/** Puts a key that no longer signs under `previous`, unless the file already trusts it. */
function retire(body: KeyFile, key: { key_id: string; public_key: string }, at: string): void {
  if (key.key_id === body.key_id || body.previous.some((p) => p.key_id === key.key_id)) return;
  body.previous.unshift({ key_id: key.key_id, public_key: key.public_key, retired_at: at });
}

function newestFirst(previous: RetiredKey[]): RetiredKey[] {
  return [...previous].sort((a, b) => (a.retired_at < b.retired_at ? 1 : a.retired_at > b.retired_at ? -1 : 0));
}

function fileKeyBody(seed: Uint8Array, now: Date, previous: RetiredKey[]): KeyFile {
  const { publicKey } = keyPairFromSeed(seed);
  return { key_id: controlPlaneKeyId(publicKey), public_key: encodeBase64url(publicKey), private_key: encodeBase64url(seed), created_at: now.toISOString(), previous };
}

function writeKeyFile(dataDir: string, body: KeyFile): void {
  ensureDir(join(dataDir, 'keys'), 0o700);
  writeFileDurably(keyFilePath(dataDir), JSON.stringify(body, null, 2) + '\n', 0o600);
}

/** The lock `svcd keys rotate` holds on `<data_dir>/keys` (counted: a rotation's own load() shares it). */
function lockKeyDir(dataDir: string): () => void {
  try {
    return lockDataDir(join(dataDir, 'keys'), 'key directory');
  } catch (err) {
    if (!(err instanceof DataDirInUseError)) throw err;
    throw new Error(`svcd keys rotate${err.pid === null ? '' : ` (pid ${err.pid})`} is writing ${keyFilePath(dataDir)}; start again when it is done`);
  }
}

/**
 * Narrows the key file to its owner (0600), as svcd writes it: a file restored from a backup
 * or copied with a wider mode would otherwise leave the private key readable by every local
 * user. Best effort: a file svcd does not own, or on a read-only disk, stays as it is.
 */
function keepPrivate(file: string): void {
  clearModeBits(file, 0o077);
}

/**
 * No key file: null, and svcd makes a new key. But a symbolic link whose target is missing (a
 * secrets volume not mounted yet) names a key that exists somewhere: a new one in its place
 * would sign remits and run heads nothing else trusts, and replace the link for good.
 */
function refuseDanglingLink(file: string): null {
  let target: string;
  try {
    target = readlinkSync(file);
  } catch {
    return null; // no file, and no link either
  }
  throw new Error(`${file} is a symbolic link to ${target}, which does not exist; svcd makes a new control-plane key only where there is no file at all: mount or restore the key, or remove the link`);
}

/**
 * The key file, checked (null when there is none). Every problem names the file and says what
 * is wrong: a truncated file must not stop svcd with a bare JSON parser message.
 */
function readKeyFile(file: string): KeyFile | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return refuseDanglingLink(file);
    throw new Error(`${file}: cannot read the control-plane key file: ${(err as Error).message}`, { cause: err });
  }
  keepPrivate(file);
  const hint = 'restore it from a backup (it holds the key that signed remits and run heads)';
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const what = text.trim() === '' ? 'is empty' : `is not JSON (${(err as Error).message})`;
    throw new Error(`${file}: the control-plane key file ${what}; ${hint}`, { cause: err });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${file}: the control-plane key file must be a JSON object; ${hint}`);
  const raw = parsed as Record<string, unknown>;
  const body: KeyFile = { previous: retiredKeys(file, raw.previous) };
  const own = (['key_id', 'public_key', 'private_key'] as const).filter((m) => raw[m] !== undefined);
  if (own.length > 0) {
    const missing = (['key_id', 'public_key', 'private_key'] as const).filter((m) => typeof raw[m] !== 'string');
    if (missing.length > 0) throw new Error(`${file}: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing or not a string; ${hint}`);
    const seed = decodeBase64url(raw.private_key as string);
    if (!seed || seed.length !== 32) throw new Error(`${file}: private_key is not a 32-byte base64url seed; ${hint}`);
    const { publicKey } = keyPairFromSeed(seed);
    if (raw.public_key !== encodeBase64url(publicKey)) throw new Error(`${file}: public_key is not the public key of private_key; ${hint}`);
    if (raw.key_id !== controlPlaneKeyId(publicKey)) throw new Error(`${file}: key_id ${String(raw.key_id)} is not the id of its key (${controlPlaneKeyId(publicKey)}); ${hint}`);
    if (raw.created_at !== undefined && typeof raw.created_at !== 'string') throw new Error(`${file}: created_at must be a string`);
    Object.assign(body, { key_id: raw.key_id, public_key: raw.public_key, private_key: raw.private_key, created_at: raw.created_at });
    if (body.created_at === undefined) delete body.created_at;
  }
  if (raw.env_key !== undefined) body.env_key = envKeyRecord(file, raw.env_key);
  if (body.private_key === undefined && body.env_key === undefined) throw new Error(`${file}: key_id, public_key and private_key are missing; ${hint}`);
  // Members in the order the file is written.
  return { key_id: body.key_id, public_key: body.public_key, private_key: body.private_key, created_at: body.created_at, previous: body.previous, env_key: body.env_key };
}

function envKeyRecord(file: string, value: unknown): EnvKeyRecord {
  const e = (value ?? {}) as Partial<EnvKeyRecord>;
  if (typeof e.key_id !== 'string' || typeof e.public_key !== 'string' || typeof e.since !== 'string') throw new Error(`${file}: env_key must have a key_id, a public_key and a since`);
  checkPublicKey(`${file}: env_key`, e.key_id, e.public_key);
  return { key_id: e.key_id, public_key: e.public_key, since: e.since };
}

/** Refuses a key the file would have svcd trust: not a valid point, of small order, or under another key's id. */
function checkPublicKey(where: string, keyId: string, publicKey: string): void {
  const raw = decodeBase64url(publicKey);
  if (!raw) throw new Error(`${where} (${keyId}): public_key is not unpadded base64url`);
  const problem = publicKeyProblem(raw);
  if (problem) throw new Error(`${where} (${keyId}): public key ${problem}; refusing to trust it`);
  if (keyId !== controlPlaneKeyId(raw)) throw new Error(`${where}: key_id ${keyId} is not the id of its public key (${controlPlaneKeyId(raw)})`);
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
    checkPublicKey(where, e.key_id, e.public_key);
    return { key_id: e.key_id, public_key: e.public_key, retired_at: e.retired_at };
  });
}

export function keyFilePath(dataDir: string): string {
  return join(dataDir, 'keys', 'control-plane.json');
}

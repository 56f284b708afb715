/**
 * `svc keys`: publisher keys and the kernel's control-plane keys (decisions §2).
 *   svc keys gen [-o FILE] [--force]   a new publisher key pair {key_id, public_key, private_key}
 *   svc keys show                      the kernel's GET /v1/keys (current key and `previous`)
 *   svc keys publisher FILE            the `KEY_ID:PUBLIC_KEY` that trusts a key file (never its private key)
 *
 * Publisher key ids made here are `pub-` + the first 16 characters of
 * base64url(sha256(public key)), the same shape as the control-plane's `cp-` ids, so a key id
 * names exactly one key. svcd trusts the key with `--publisher KEY_ID:PUBLIC_KEY`.
 */
import { statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import type { PublishedKeys } from '../../src/keys/keyring.js';
import { keyFileSeed } from '../../src/bundle/sign.js';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { keyPairFromSeed } from '../../src/keys/ed25519.js';
import { generatePublisherKey, parsePublisher } from '../../src/keys/publishers.js';
import { writeFileDurably } from '../../src/util/durable-file.js';
import { kernelClient, output, table } from '../context.js';
import { CliError, EXIT, fsReason } from '../exit.js';
import type { SvcHttpClient } from '../http-client.js';
import { readDataFile } from './data-file.js';

export { registerKeys } from '../register/keys.js';

export interface GenResult {
  key_id: string;
  public_key: string;
  /** Only when printed instead of written to a file. */
  private_key?: string;
  /** The file written (mode 0600). */
  file?: string;
  /** The svcd flag that trusts this key. */
  publisher: string;
}

/** Makes a publisher key pair; writes it to `file` (mode 0600, never over an existing file unless `force`). */
export function handleGen(file?: string, force = false): GenResult {
  const pair = generatePublisherKey();
  const publisher = `${pair.key_id}:${pair.public_key}`;
  if (!file) return { ...pair, publisher };
  const path = resolve(file);
  const text = JSON.stringify(pair, null, 2) + '\n';
  // A directory cannot be overwritten with --force: say so rather than suggest it.
  if (isDirectory(path)) throw new CliError(`${path} is a directory; name the key file to write, e.g. ${join(path, 'publisher.json')}`, EXIT.failed);
  try {
    // --force replaces the file (a new 0600 one renamed over it) rather than writing into it:
    // the old file keeps its mode and its other names while it is written, and a symbolic link
    // there would take the private key to the file it points at.
    if (force) writeFileDurably(path, text, 0o600);
    else writeFileSync(path, text, { mode: 0o600, flag: 'wx' }); // a new file, 0600 from its creation
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw new CliError(`${path} already exists; pass --force to overwrite it`, EXIT.failed);
    throw new CliError(`cannot write ${path}: ${fsReason(err)}`, EXIT.failed);
  }
  return { key_id: pair.key_id, public_key: pair.public_key, file: path, publisher };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

export interface PublisherSpec {
  key_id: string;
  public_key: string;
  /** The value of svcd's `--publisher` (and an entry of `SVC_PUBLISHERS`). */
  publisher: string;
}

/**
 * The public half of a key file, as svcd trusts it: `{key_id, public_key, private_key}` as `svc
 * keys gen` writes it (the private key must match the public key), or just `{key_id,
 * public_key}` as one is handed to an operator. Checked as svcd checks `--publisher`, so what
 * this prints starts svcd.
 */
export function handlePublisher(file: string): PublisherSpec {
  const value = readDataFile(file);
  const v = (value !== null && typeof value === 'object' && !Array.isArray(value) ? value : {}) as Record<string, unknown>;
  if (typeof v.key_id !== 'string' || (typeof v.public_key !== 'string' && typeof v.private_key !== 'string')) {
    throw new CliError(`${file} is not a publisher key file {key_id, public_key[, private_key]} (make one with: svc keys gen -o FILE)`, EXIT.failed);
  }
  let publicKey = v.public_key as string | undefined;
  if (typeof v.private_key === 'string') {
    try {
      publicKey = encodeBase64url(keyPairFromSeed(keyFileSeed(v as never)).publicKey);
    } catch (err) {
      throw new CliError(`${file}: ${(err as Error).message}`, EXIT.failed);
    }
  }
  try {
    const key = parsePublisher(`${v.key_id}:${publicKey}`);
    return { key_id: key.key_id, public_key: key.public_key, publisher: `${key.key_id}:${key.public_key}` };
  } catch (err) {
    throw new CliError(`${file}: ${(err as Error).message}`, EXIT.failed);
  }
}

/** GET /v1/keys. */
export async function handleShow(client: SvcHttpClient): Promise<PublishedKeys> {
  return (await client.request<PublishedKeys>('GET', '/keys', undefined, {}, ['key_id', 'public_key'])).body;
}

function genHuman(r: GenResult): string {
  if (!r.file) return JSON.stringify({ key_id: r.key_id, public_key: r.public_key, private_key: r.private_key }, null, 2);
  return [`wrote ${r.file} (mode 0600)`, `key_id      ${r.key_id}`, `public_key  ${r.public_key}`, `trust it:   svcd --publisher ${r.publisher}`].join('\n');
}

function showHuman(k: PublishedKeys): string {
  const lines = [`key_id      ${k.key_id}`, `algorithm   ${k.algorithm}`, `public_key  ${k.public_key}`];
  if (k.previous.length === 0) lines.push('previous    none');
  else lines.push('', 'previous keys (still trusted for verification):', table(['KEY_ID', 'PUBLIC_KEY', 'RETIRED_AT'], k.previous.map((p) => [p.key_id, p.public_key, p.retired_at])));
  return lines.join('\n');
}

/**
 * What each `svc keys` command does when it runs. The commands themselves (names, options, help
 * texts) are defined in cli/register/keys.ts, which loads this module only when one of them
 * runs (docs/design.md, "CLI start-up").
 */
export const keysActions = {
  gen(this: Command, o: { output?: string; force?: boolean }) {
    const r = handleGen(o.output, Boolean(o.force));
    output(this, r.file ? { key_id: r.key_id, public_key: r.public_key, file: r.file, publisher: r.publisher } : { key_id: r.key_id, public_key: r.public_key, private_key: r.private_key }, genHuman.bind(null, r));
  },

  publisher(this: Command, file: string) {
    output(this, handlePublisher(file), (r: PublisherSpec) => r.publisher);
  },

  async show(this: Command) {
    output(this, await handleShow(kernelClient(this)), showHuman);
  },
};

/**
 * Ids are a type prefix plus a ULID (decisions §1): 26 Crockford base32 characters, the
 * first ten the millisecond time, so sorting ids sorts by creation. Monotonic within a
 * millisecond so that ids made in one burst still sort in the order they were made.
 */
import { randomBytes } from 'node:crypto';

export const ID_PREFIXES = {
  remit: 'rmt_',
  run: 'run_',
  lease: 'lse_',
  approval: 'apr_',
  bundle: 'bnd_',
  policy: 'pol_',
  event: 'evt_',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

let lastTime = -1;
let lastRandom: number[] = [];

function encodeTime(ms: number): string {
  let out = '';
  let t = ms;
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[t % 32] + out;
    t = Math.floor(t / 32);
  }
  return out;
}

// Random bytes are drawn 4 KiB at a time: one randomBytes call per id was a measurable part
// of a run's creation (bench/README.md).
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let poolAt = POOL_BYTES;

function freshRandom(): number[] {
  if (poolAt + 16 > pool.length) {
    pool = randomBytes(POOL_BYTES);
    poolAt = 0;
  }
  const out = new Array<number>(16);
  for (let i = 0; i < 16; i++) out[i] = pool[poolAt + i]! & 31;
  poolAt += 16;
  return out;
}

function increment(digits: number[]): number[] {
  const next = digits.slice();
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i]! < 31) {
      next[i]! += 1;
      return next;
    }
    next[i] = 0;
  }
  return freshRandom(); // overflow after 32^16 ids in one ms: practically never
}

/** A new ULID for time `ms` (default: now; a fraction of a millisecond is dropped). */
export function ulid(ms: number = Date.now()): string {
  // A clock may read fractions (performance.timeOrigin + performance.now()): the time
  // characters are whole milliseconds, or `t % 32` indexes no character.
  ms = Math.floor(ms);
  if (ms <= lastTime) {
    lastRandom = increment(lastRandom);
    ms = lastTime;
  } else {
    lastTime = ms;
    lastRandom = freshRandom();
  }
  return encodeTime(ms) + lastRandom.map((d) => CROCKFORD[d]).join('');
}

/** A new id of the given kind, e.g. newId('run') → "run_01J…". */
export function newId(kind: IdKind, ms?: number): string {
  return ID_PREFIXES[kind] + ulid(ms);
}

/** True when `id` has the prefix of `kind` and a well-formed ULID. */
export function isId(kind: IdKind, id: unknown): id is string {
  return typeof id === 'string' && id.startsWith(ID_PREFIXES[kind]) && /^[0-9A-HJKMNP-TV-Z]{26}$/.test(id.slice(ID_PREFIXES[kind].length));
}

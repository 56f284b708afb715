/**
 * The event hash chain and signed head (D §7) as properties: a log as written always
 * verifies, in one piece or a page at a time; any edit, reorder, drop, duplicate or insertion
 * of an event, or a log cut short, is reported — even when the forger recomputes every hash
 * after the change, since the forger cannot sign the head.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChainVerifier, verifyChain, type SignedHead, type StoredEventRow } from '../../src/events/chain.js';
import { canonicalEventTexts, eventHash, signHead } from '../../src/events/event-hash.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import { controlPlaneKeyId } from '../../src/keys/keyring.js';
import type { TrustedKeys } from '../../src/types.js';

const pair = generateKeyPair();
const keyId = controlPlaneKeyId(pair.publicKey);
const keys: TrustedKeys = { lookup: (id) => (id === keyId ? pair.publicKey : null) };
const RUN = 'run_01PROPS';

interface EventSpec {
  kind: string;
  payload: Record<string, unknown>;
  actor: StoredEventRow['actor'];
  at: string;
}

const json = fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown); // no -0: JSON has one zero
const eventSpec: fc.Arbitrary<EventSpec> = fc.record({
  kind: fc.constantFrom('note', 'tool.called', 'step.leased', 'model.called'),
  payload: fc.dictionary(fc.constantFrom('a', 'b', 'text', 'é'), json, { maxKeys: 3 }),
  actor: fc.oneof(fc.constant(null), fc.constant('kernel'), fc.record({ id: fc.constantFrom('ana', 'bo'), role: fc.constantFrom('agent', 'finance') })) as fc.Arbitrary<StoredEventRow['actor']>,
  at: fc.integer({ min: 0, max: 10_000 }).map((s) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString()),
});

/** Hashes and links events as the kernel writes them, from seq `from` after `prev`. */
function link(specs: readonly EventSpec[], from = 1, prev = ''): StoredEventRow[] {
  const out: StoredEventRow[] = [];
  specs.forEach((s, i) => {
    const ev = { seq: from + i, prev_hash: prev, kind: s.kind, payload: s.payload, actor: s.actor, at: s.at };
    const hash = eventHash(RUN, ev);
    out.push({ ...ev, hash, stored: canonicalEventTexts(ev) });
    prev = hash;
  });
  return out;
}

function headOf(evs: readonly StoredEventRow[]): SignedHead {
  const last = evs[evs.length - 1];
  const head = { run_id: RUN, seq: last?.seq ?? 0, hash: last?.hash ?? '' };
  return { ...head, signature: signHead((m) => signBytes(pair.seed, m), head), key_id: keyId };
}

/** The log with its hashes and links recomputed from event `i` on (a forger with the database). */
function relinked(evs: readonly StoredEventRow[], from: number): StoredEventRow[] {
  const kept = evs.slice(0, from);
  const rest = evs.slice(from).map(({ kind, payload, actor, at }) => ({ kind, payload, actor, at }));
  return [...kept, ...link(rest, kept.length + 1, kept[kept.length - 1]?.hash ?? '')];
}

type Tamper =
  | { t: 'edit'; i: number; field: 'kind' | 'payload' | 'actor' | 'at' | 'seq' | 'prev_hash' | 'hash' }
  | { t: 'drop'; i: number }
  | { t: 'swap'; i: number; j: number }
  | { t: 'duplicate'; i: number }
  | { t: 'insert'; i: number; spec: EventSpec }
  | { t: 'truncate'; keep: number };

const tamper: fc.Arbitrary<Tamper> = fc.oneof(
  fc.record({ t: fc.constant('edit' as const), i: fc.nat(), field: fc.constantFrom('kind', 'payload', 'actor', 'at', 'seq', 'prev_hash', 'hash') as fc.Arbitrary<'kind'> }),
  fc.record({ t: fc.constant('drop' as const), i: fc.nat() }),
  fc.record({ t: fc.constant('swap' as const), i: fc.nat(), j: fc.nat() }),
  fc.record({ t: fc.constant('duplicate' as const), i: fc.nat() }),
  fc.record({ t: fc.constant('insert' as const), i: fc.nat(), spec: eventSpec }),
  fc.record({ t: fc.constant('truncate' as const), keep: fc.nat() }),
);

/** The log after the change, or null when the change leaves it as it was. */
function apply(evs: StoredEventRow[], change: Tamper): StoredEventRow[] | null {
  const n = evs.length;
  const out = evs.map((e) => ({ ...e }));
  switch (change.t) {
    case 'edit': {
      const e = out[change.i % n]!;
      const stored = (x: StoredEventRow) => ({ ...x, stored: canonicalEventTexts(x) });
      if (change.field === 'kind') out[change.i % n] = stored({ ...e, kind: `${e.kind}x` });
      else if (change.field === 'payload') out[change.i % n] = stored({ ...e, payload: { ...e.payload, tampered: true } });
      else if (change.field === 'actor') out[change.i % n] = stored({ ...e, actor: e.actor === 'mallory' ? 'eve' : 'mallory' });
      else if (change.field === 'at') out[change.i % n] = { ...e, at: new Date(Date.parse(e.at) + 1).toISOString() };
      else if (change.field === 'seq') out[change.i % n] = { ...e, seq: e.seq + 1 };
      else if (change.field === 'prev_hash') out[change.i % n] = { ...e, prev_hash: e.prev_hash === '' ? '0'.repeat(64) : '' };
      else out[change.i % n] = { ...e, hash: e.hash.replace(/^./, (c) => (c === '0' ? '1' : '0')) };
      return out;
    }
    case 'drop':
      out.splice(change.i % n, 1);
      return out;
    case 'swap': {
      const i = change.i % n;
      const j = change.j % n;
      if (i === j) return null;
      [out[i], out[j]] = [out[j]!, out[i]!];
      return out;
    }
    case 'duplicate':
      out.splice(change.i % n, 0, { ...out[change.i % n]! });
      return out;
    case 'insert': {
      const i = change.i % (n + 1);
      const [forged] = link([change.spec], i + 1, out[i - 1]?.hash ?? '');
      out.splice(i, 0, forged!);
      return out;
    }
    case 'truncate':
      if (change.keep % n === n) return null;
      return out.slice(0, change.keep % n);
  }
}

describe('the event hash chain (D §7)', () => {
  it('a log as the kernel writes it, with its signed head, always verifies (with or without stored texts)', () => {
    fc.assert(
      fc.property(fc.array(eventSpec, { maxLength: 8 }), (specs) => {
        const evs = link(specs);
        expect(verifyChain(RUN, evs, headOf(evs), keys)).toEqual([]);
        const withoutTexts = evs.map(({ stored: _s, ...e }) => e);
        expect(verifyChain(RUN, withoutTexts, headOf(evs), keys)).toEqual([]);
      }),
      { numRuns: 150 },
    );
  });

  it('verifying a page at a time finds what verifying the whole log finds, wherever the pages break', () => {
    fc.assert(
      fc.property(fc.array(eventSpec, { minLength: 1, maxLength: 8 }), tamper, fc.array(fc.nat(8), { maxLength: 4 }), (specs, change, breaks) => {
        const evs = apply(link(specs), change) ?? link(specs);
        const head = headOf(link(specs));
        const whole = verifyChain(RUN, evs, head, keys);
        const v = new ChainVerifier(RUN);
        const cuts = [...new Set(breaks.map((b) => b % (evs.length + 1)))].sort((a, b) => a - b);
        let at = 0;
        for (const cut of [...cuts, evs.length]) {
          v.push(evs.slice(at, cut));
          at = cut;
        }
        expect(v.finish(head, keys)).toEqual(whole);
      }),
      { numRuns: 150 },
    );
  });

  it('any edit, drop, reorder, duplicate, insertion or cut is reported against the signed head', () => {
    fc.assert(
      fc.property(fc.array(eventSpec, { minLength: 1, maxLength: 8 }), tamper, (specs, change) => {
        const evs = link(specs);
        const changed = apply(evs, change);
        fc.pre(changed !== null);
        expect(verifyChain(RUN, changed!, headOf(evs), keys).length).toBeGreaterThan(0);
      }),
      { numRuns: 300 },
    );
  });

  it('…even when the forger recomputes every hash and link after the change: the head they cannot sign catches it', () => {
    fc.assert(
      fc.property(fc.array(eventSpec, { minLength: 1, maxLength: 8 }), tamper, (specs, change) => {
        const evs = link(specs);
        const changed = apply(evs, change);
        fc.pre(changed !== null);
        const forged = relinked(changed!, 0);
        // Equal content relinked is the same log (a swap of two equal events, say): nothing to find.
        fc.pre(JSON.stringify(forged.map((e) => e.hash)) !== JSON.stringify(evs.map((e) => e.hash)));
        const errors = verifyChain(RUN, forged, headOf(evs), keys);
        expect(errors.map((e) => e.reason)).toContain('head_mismatch');
        // A head re-signed by anyone but the control-plane key does not verify either.
        const other = generateKeyPair();
        const last = forged[forged.length - 1];
        const head = { run_id: RUN, seq: last?.seq ?? 0, hash: last?.hash ?? '' };
        const fake = { ...head, signature: signHead((m) => signBytes(other.seed, m), head), key_id: keyId };
        expect(verifyChain(RUN, forged, fake, keys).map((e) => e.reason)).toEqual(['head_signature_invalid']);
      }),
      { numRuns: 100 },
    );
  });

  it('a chain is bound to its run: the same rows under another run id fail at every event', () => {
    fc.assert(
      fc.property(fc.array(eventSpec, { minLength: 1, maxLength: 5 }), (specs) => {
        const evs = link(specs).map(({ stored: _s, ...e }) => e);
        const errors = verifyChain('run_OTHER', evs, null, keys);
        expect(errors.filter((e) => e.reason === 'hash_mismatch').map((e) => e.seq)).toEqual(evs.map((e) => e.seq));
      }),
      { numRuns: 50 },
    );
  });
});

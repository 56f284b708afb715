/**
 * The event hash chain and the signed head (decisions §7): hash = sha256(JCS({run_id, seq,
 * prev_hash, kind, payload, actor, at})), prev_hash links, seq from 1, and a head signature
 * that catches a log cut short at its end.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { verifyChain, type StoredEventRow } from '../../src/events/chain.js';
import { eventHash, headMessage, signHead, verifyHead } from '../../src/events/event-hash.js';
import { ALL_EVENT_KINDS, EXTERNAL_EVENT_KINDS, isExternalKind } from '../../src/events/kinds.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import { controlPlaneKeyId } from '../../src/keys/keyring.js';
import type { TrustedKeys } from '../../src/types.js';

const pair = generateKeyPair();
const keyId = controlPlaneKeyId(pair.publicKey);
const keys: TrustedKeys = { lookup: (id) => (id === keyId ? pair.publicKey : null) };
const sign = (m: Uint8Array) => signBytes(pair.seed, m);

function chain(runId: string, n: number): StoredEventRow[] {
  const out: StoredEventRow[] = [];
  let prev = '';
  for (let seq = 1; seq <= n; seq++) {
    const ev = { seq, prev_hash: prev, kind: seq === 1 ? 'run.created' : 'note', payload: { i: seq, text: `é ${seq}` }, actor: seq === 1 ? { id: 'ana', role: 'agent' } : 'kernel', at: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString() };
    const hash = eventHash(runId, ev);
    out.push({ ...ev, hash });
    prev = hash;
  }
  return out;
}

function headOf(runId: string, evs: StoredEventRow[]) {
  const last = evs[evs.length - 1]!;
  const head = { run_id: runId, seq: last.seq, hash: last.hash };
  return { ...head, signature: signHead(sign, head), key_id: keyId };
}

describe('event hash (D §7)', () => {
  it('is hex sha256 of the JCS of {run_id, seq, prev_hash, kind, payload, actor, at}', () => {
    const ev = { seq: 1, prev_hash: '', kind: 'note', payload: { b: 2, a: [1, 'x'] }, actor: null, at: '2026-11-22T10:00:00.000Z' };
    const jcs = '{"actor":null,"at":"2026-11-22T10:00:00.000Z","kind":"note","payload":{"a":[1,"x"],"b":2},"prev_hash":"","run_id":"run_X","seq":1}';
    expect(eventHash('run_X', ev)).toBe(createHash('sha256').update(jcs).digest('hex'));
  });

  it('changes with every covered field', () => {
    const base = { seq: 3, prev_hash: 'ab', kind: 'note', payload: { a: 1 }, actor: 'kernel', at: '2026-11-22T10:00:00.000Z' };
    const h = eventHash('run_X', base);
    expect(eventHash('run_Y', base)).not.toBe(h);
    for (const change of [{ seq: 4 }, { prev_hash: 'ac' }, { kind: 'tool.called' }, { payload: { a: 2 } }, { actor: 'w' }, { at: '2026-11-22T10:00:00.001Z' }]) {
      expect(eventHash('run_X', { ...base, ...change })).not.toBe(h);
    }
  });

  it('signs the head over JCS({run_id, seq, hash}) and verifies only with the right key and head', () => {
    const head = { run_id: 'run_X', seq: 7, hash: 'f'.repeat(64) };
    expect(headMessage(head).toString()).toBe(`{"hash":"${'f'.repeat(64)}","run_id":"run_X","seq":7}`);
    const sig = signHead(sign, head);
    expect(sig).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(verifyHead(keys, keyId, head, sig)).toBe(true);
    expect(verifyHead(keys, keyId, { ...head, seq: 6 }, sig)).toBe(false);
    expect(verifyHead(keys, 'cp-unknown', head, sig)).toBe(false);
    const flipped = Buffer.from(sig, 'base64url');
    flipped[10] ^= 1;
    expect(verifyHead(keys, keyId, head, flipped.toString('base64url'))).toBe(false);
    expect(verifyHead(keys, keyId, head, 'not base64url!')).toBe(false);
  });
});

describe('verifyChain (D §7 replay chain_errors)', () => {
  const runId = 'run_01TEST';

  it('accepts an intact log with its signed head', () => {
    const evs = chain(runId, 5);
    expect(verifyChain(runId, evs, headOf(runId, evs), keys)).toEqual([]);
  });

  it('reports an edited payload at its seq (hash_mismatch)', () => {
    const evs = chain(runId, 5);
    const head = headOf(runId, evs);
    evs[2] = { ...evs[2]!, payload: { i: 3, text: 'edited' } };
    expect(verifyChain(runId, evs, head, keys)).toEqual([{ seq: 3, reason: 'hash_mismatch' }]);
  });

  it('reports an edited event whose hash was recomputed at the next link (prev_hash_mismatch)', () => {
    const evs = chain(runId, 5);
    const head = headOf(runId, evs);
    const edited = { ...evs[1]!, payload: { i: 2, text: 'forged' } };
    edited.hash = eventHash(runId, edited);
    evs[1] = edited;
    expect(verifyChain(runId, evs, head, keys)).toEqual([{ seq: 3, reason: 'prev_hash_mismatch' }]);
  });

  it('reports a deleted last event against the signed head (head_mismatch)', () => {
    const evs = chain(runId, 5);
    const head = headOf(runId, evs);
    const errors = verifyChain(runId, evs.slice(0, 4), head, keys);
    expect(errors).toEqual([{ seq: 5, reason: 'head_mismatch', detail: 'signed head is seq 5, log ends at seq 4' }]);
  });

  it('reports a missing middle event (seq_gap and the broken link)', () => {
    const evs = chain(runId, 5);
    const head = headOf(runId, evs);
    const errors = verifyChain(runId, [...evs.slice(0, 2), ...evs.slice(3)], head, keys);
    expect(errors.map((e) => [e.seq, e.reason])).toEqual([
      [4, 'seq_gap'],
      [4, 'prev_hash_mismatch'],
    ]);
    expect(errors[0]!.detail).toBe('expected seq 3');
  });

  it('reports a signed head that names the last seq but another hash, or the last hash at another seq (head_mismatch)', () => {
    const evs = chain(runId, 5);
    const signed = (seq: number, hash: string) => {
      const head = { run_id: runId, seq, hash };
      return { ...head, signature: signHead(sign, head), key_id: keyId };
    };
    const otherHash = chain('run_OTHER', 5)[4]!.hash;
    expect(verifyChain(runId, evs, signed(5, otherHash), keys)).toEqual([{ seq: 5, reason: 'head_mismatch', detail: 'signed head is seq 5, log ends at seq 5' }]);
    expect(verifyChain(runId, evs, signed(6, evs[4]!.hash), keys)).toEqual([{ seq: 6, reason: 'head_mismatch', detail: 'signed head is seq 6, log ends at seq 5' }]);
  });

  it('checks every link of a log without a signed head, and an empty log against the head of none (seq 0, "")', () => {
    const evs = chain(runId, 3);
    expect(verifyChain(runId, evs, null, keys)).toEqual([]);
    evs[1] = { ...evs[1]!, kind: 'step.completed' };
    expect(verifyChain(runId, evs, null, keys)).toEqual([{ seq: 2, reason: 'hash_mismatch' }]);
    const none = { run_id: runId, seq: 0, hash: '' };
    expect(verifyChain(runId, [], { ...none, signature: signHead(sign, none), key_id: keyId }, keys)).toEqual([]);
  });

  it('reports a head rewritten without the key (head_signature_invalid)', () => {
    const evs = chain(runId, 4);
    const head = headOf(runId, chain(runId, 5));
    const forged = { ...head, seq: 4, hash: evs[3]!.hash };
    expect(verifyChain(runId, evs, forged, keys)).toEqual([{ seq: 4, reason: 'head_signature_invalid' }]);
  });

  it('reports rows whose JSON does not parse', () => {
    const evs = chain(runId, 3).map((e, i) => (i === 1 ? { ...e, unparseable: true } : e));
    expect(verifyChain(runId, evs, headOf(runId, evs), keys)).toEqual([{ seq: 2, reason: 'unparseable' }]);
  });
});

describe('event kinds (D §7)', () => {
  it('the external kinds are exactly note, tool.called, tool.refused, model.called', () => {
    expect(Object.keys(EXTERNAL_EVENT_KINDS).sort()).toEqual(['model.called', 'note', 'tool.called', 'tool.refused']);
    expect(isExternalKind('note')).toBe(true);
    expect(isExternalKind('run.completed')).toBe(false);
    expect(isExternalKind('__proto__')).toBe(false);
  });

  it('man/svc-events.7 documents every kind', () => {
    const page = readFileSync(new URL('../../man/svc-events.7', import.meta.url), 'utf8');
    for (const kind of ALL_EVENT_KINDS) expect(page, kind).toContain(kind.replace(/-/g, '\\-'));
  });
});

describe('event hash input (D §7)', () => {
  it('is exactly JCS({run_id, seq, prev_hash, kind, payload, actor, at}) for any event', async () => {
    const fc = await import('fast-check');
    const { eventHashInput } = await import('../../src/events/event-hash.js');
    const { canonicalJson } = await import('../../src/encoding/canonical-json.js');
    const json = fc.jsonValue({ maxDepth: 4 }).filter((v) => !(typeof v === 'number' && Object.is(v, -0)));
    fc.assert(
      fc.property(
        fc.string(),
        fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
        fc.string(),
        fc.string(),
        fc.dictionary(fc.string(), json),
        fc.oneof(fc.constant(null), fc.string(), fc.dictionary(fc.string(), json)),
        fc.string(),
        (runId, seq, prev, kind, payload, actor, at) => {
          const ev = { seq, prev_hash: prev, kind, payload: payload as Record<string, unknown>, actor: actor as never, at };
          expect(eventHashInput(runId, ev)).toBe(canonicalJson({ run_id: runId, seq, prev_hash: prev, kind, payload, actor, at }));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('is JCS of the same object when a member is missing or seq is no safe integer (a row as a caller may hand it)', async () => {
    const fc = await import('fast-check');
    const { eventHashInput } = await import('../../src/events/event-hash.js');
    const { canonicalJson } = await import('../../src/encoding/canonical-json.js');
    const maybe = <T>(arb: import('fast-check').Arbitrary<T>) => fc.option(arb, { nil: undefined });
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constantFrom(2 ** 53, 2 ** 60, 1e21, 1.5)),
        maybe(fc.string()),
        maybe(fc.string()),
        maybe(fc.dictionary(fc.string(), fc.string())),
        maybe(fc.oneof(fc.constant(null), fc.string())),
        maybe(fc.string()),
        (seq, prev, kind, payload, actor, at) => {
          const ev = { seq, prev_hash: prev, kind, payload, actor, at } as never;
          expect(eventHashInput('run_1', ev)).toBe(canonicalJson({ run_id: 'run_1', seq, prev_hash: prev, kind, payload, actor, at }));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('stored texts (D §7; bench/README.md "replay")', () => {
  it('an event stored as its JCS texts hashes the same from the texts as from the values', async () => {
    const fc = await import('fast-check');
    const { canonicalEventTexts, eventHashOfTexts } = await import('../../src/events/event-hash.js');
    const json = fc.jsonValue({ maxDepth: 4 }).filter((v) => !(typeof v === 'number' && Object.is(v, -0)));
    fc.assert(
      fc.property(fc.dictionary(fc.string(), json), fc.oneof(fc.constant(null), fc.string(), fc.dictionary(fc.string(), json)), (payload, actor) => {
        const ev = { seq: 5, prev_hash: 'ab', kind: 'note', payload: payload as Record<string, unknown>, actor: actor as never, at: '2026-11-23T10:00:00.000Z' };
        const texts = canonicalEventTexts(ev);
        expect(eventHashOfTexts('run_X', ev, texts)).toBe(eventHash('run_X', ev));
        // Reads back as the JSON.stringify text stored before did (JSON has no -0, either way).
        expect(JSON.parse(texts.payload)).toEqual(JSON.parse(JSON.stringify(payload)));
      }),
      { numRuns: 300 },
    );
  });

  it('verifyChain accepts stored texts as written, reformatted but equal rows, and catches edited ones', async () => {
    const { canonicalEventTexts } = await import('../../src/events/event-hash.js');
    const runId = 'run_T';
    const withTexts = chain(runId, 4).map((e) => ({ ...e, stored: canonicalEventTexts(e) }));
    expect(verifyChain(runId, withTexts, headOf(runId, withTexts), keys)).toEqual([]);
    // A row written before texts were stored canonically (other key order, spaces): still valid.
    const reformatted = withTexts.map((e, i) => (i === 2 ? { ...e, stored: { payload: `{ "text": ${JSON.stringify(e.payload.text)}, "i": ${e.payload.i} }`, actor: ` ${JSON.stringify(e.actor)}` } } : e));
    expect(verifyChain(runId, reformatted, headOf(runId, reformatted), keys)).toEqual([]);
    // Edited: the text and the value it parses to differ from what was hashed.
    const edited = withTexts.map((e, i) => (i === 2 ? { ...e, payload: { ...e.payload, i: 99 }, stored: { payload: JSON.stringify({ ...e.payload, i: 99 }), actor: e.stored.actor } } : e));
    expect(verifyChain(runId, edited, headOf(runId, edited), keys)).toEqual([{ seq: 3, reason: 'hash_mismatch' }]);
  });
});

/**
 * Request bodies are I-JSON (RFC 7493), which RFC 8785 canonical JSON assumes (decisions §1):
 * `textProblem` finds a member name repeated in one object, a lone surrogate and an integer a
 * double cannot hold exactly, with the JSON pointer of the place; everything else JSON.parse
 * accepts passes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { textProblem } from '../../src/encoding/json-limits.js';
import { wellFormedJson } from '../../src/encoding/well-formed-json.js';

describe('textProblem (D §1, RFC 7493)', () => {
  it.each([
    ['{"a":1,"a":2}', '/a', 'member "a" appears twice in one object'],
    ['{"bundle":{"name":"evil","version":"1","name":"refunds"}}', '/bundle/name', 'member "name" appears twice'],
    ['{"a":[1,{"b":0},{"d":2,"d":3}]}', '/a/2/d', 'appears twice'],
    ['{"x":{"k":1},"y":{"k":1,"\\u006b":2}}', '/y/k', 'member "k" appears twice'], // an escaped spelling of the same name
    ['{"a":["ok","\\ud800"]}', '/a/1', 'the string at /a/1 holds a lone surrogate'],
    ['{"a":{"\\udfff":1}}', '/a/\udfff', 'the member name at'],
    ['["x","y\\udc00z"]', '/1', 'lone surrogate'],
    ['{"invoice_id":9007199254740993}', '/invoice_id', 'the integer 9007199254740993 at /invoice_id is past what a JSON number holds exactly (it would be read as 9007199254740992)'],
    ['{"a":[0,{"b":-12345678901234567}]}', '/a/1/b', 'it would be read as -12345678901234568'],
    ['123456789012345678901234567890', '', 'it would be read as 1.2345678901234568e+29'],
  ])('%s → %s', (text, path, message) => {
    JSON.parse(text); // valid JSON all the same
    const p = textProblem(text);
    expect(p?.path).toBe(path);
    expect(p?.message).toContain(message);
  });

  it('integers a double holds exactly or JSON.stringify writes, long fractions and exponents are fine', () => {
    // 37373537320439930 is how JSON.stringify writes the double 37373537320439928: kept, as
    // every JavaScript producer (the worker among them) writes it so.
    for (const t of ['{"a":9007199254740992}', '[9007199254740991,-9007199254740991]', '{"a":100000000000000000000}', '{"a":1152921504606846976}', '[-37373537320439930]', '{"x":1.2345678901234567890123}', '{"x":12345678901234567e3}', '{"x":"9007199254740993"}', '1e400', '[0,-0,123456789012345]']) {
      expect(textProblem(t), t).toBeNull();
    }
  });

  it('the same name in different objects, pairs of surrogates, and escapes in values are fine', () => {
    for (const t of ['[[{},[""]]]', '{"a":{},"b":"c"}', '{"a":{"k":1},"b":{"k":1},"k":[{"k":1},{"k":2}]}', '{"e":"\\ud83d\\ude00","\\ud83d\\ude00":1}', '{"q":"say \\"a\\":1, \\"a\\":2"}', '[]', '{}', '"x"', '3']) {
      expect(textProblem(t), t).toBeNull();
    }
  });

  it('a repeated name of a megabyte is named in short', () => {
    const long = 'n'.repeat(1_000_000);
    const p = textProblem(`{"${long}":1,"${long}":2}`)!;
    expect(p.path).toBe(`/${'n'.repeat(1023)}…`);
    expect(p.message.length).toBeLessThan(320);
  });

  it('a large object moves to a Set and stays linear; its duplicate is still found', () => {
    const o: Record<string, number> = {};
    for (let i = 0; i < 50_000; i++) o[`k${i}`] = i;
    const text = JSON.stringify(o);
    expect(textProblem(text)).toBeNull();
    expect(textProblem(`${text.slice(0, -1)},"k49999":0}`)?.path).toBe('/k49999');
  });

  // A model of the rule: objects written member by member, names drawn from a small set so
  // repeats are common, strings from any UTF-16 units so lone surrogates are too.
  type Doc = { o: Array<[string, Doc]> } | { a: Doc[] } | { s: string } | { n: number };
  const str = fc.string({ unit: 'binary', maxLength: 4 });
  const { doc } = fc.letrec<{ doc: Doc }>((tie) => ({
    doc: fc.oneof(
      { depthSize: 'small' },
      fc.record({ s: str }),
      fc.record({ n: fc.integer() }),
      fc.record({ a: fc.array(tie('doc'), { maxLength: 4 }) }),
      fc.record({ o: fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', '\ud800', 'é'), tie('doc')), { maxLength: 4 }) }),
    ),
  }));
  const write = (d: Doc): string =>
    'o' in d ? `{${d.o.map(([k, v]) => `${JSON.stringify(k)}:${write(v)}`).join(',')}}` : 'a' in d ? `[${d.a.map(write).join(',')}]` : 's' in d ? JSON.stringify(d.s) : String(d.n);
  const lone = (t: string) => /\p{Cs}/u.test(t);
  const bad = (d: Doc): boolean =>
    'o' in d ? new Set(d.o.map(([k]) => k)).size < d.o.length || d.o.some(([k, v]) => lone(k) || bad(v)) : 'a' in d ? d.a.some(bad) : 's' in d ? lone(d.s) : false;

  it('finds a problem exactly when the document repeats a name in one object or holds a lone surrogate', () => {
    fc.assert(
      fc.property(doc, (d) => {
        const text = write(d);
        JSON.parse(text);
        return (textProblem(text) !== null) === bad(d);
      }),
      { numRuns: 2000 },
    );
  });

  it('finds nothing in what JSON.stringify writes of any JSON value (its names are unique, its strings well formed)', () => {
    fc.assert(fc.property(fc.jsonValue(), (v) => textProblem(JSON.stringify(v)) === null), { numRuns: 500 });
  });
});

describe('wellFormedJson: what the worker and the gateway send svcd', () => {
  it('replaces lone surrogates in values and names with U+FFFD, so svcd accepts the text; pairs stay', () => {
    const cut = { output: { text: 'thanks \ud83d', list: ['\udc00x', '😀'] }, ['k\ud800']: 1 };
    expect(textProblem(JSON.stringify(cut))).not.toBeNull();
    const text = wellFormedJson(cut);
    expect(textProblem(text)).toBeNull();
    expect(JSON.parse(text)).toEqual({ output: { text: 'thanks \ufffd', list: ['\ufffdx', '😀'] }, ['k\ufffd']: 1 });
    expect(wellFormedJson({ a: [1, 'b', null, { c: true }] })).toBe(JSON.stringify({ a: [1, 'b', null, { c: true }] }));
  });
});

// Interface 5.5 (grants and the data boundary): detectors, field classes from tool descriptors,
// redaction paths and counts, and the property that nothing of an ungranted class gets through.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataBoundary, fieldClassesOf, marker, redactText, redactValue, redactionNote } from '../../src/worker/data-boundary.js';
import { BUILTIN_DETECTORS, detect, findAll, isCardNumber, luhnValid } from '../../src/worker/detectors.js';

describe('detectors (I 5.5 built-in classes)', () => {
  it('Luhn accepts valid card numbers and rejects one-digit changes', () => {
    expect(luhnValid('4111111111111111')).toBe(true);
    expect(luhnValid('4111111111111112')).toBe(false);
    expect(luhnValid('378282246310005')).toBe(true); // Amex test number
    expect(luhnValid('')).toBe(false);
  });

  it('card numbers need a network prefix, 13–19 digits and a valid Luhn sum', () => {
    expect(isCardNumber('4111 1111 1111 1111')).toBe(true);
    expect(isCardNumber('5555-5555-5555-4444')).toBe(true);
    expect(isCardNumber('378282246310005')).toBe(true);
    expect(isCardNumber('6011111111111117')).toBe(true);
    // Epoch milliseconds pass Luhn sometimes but start with 1: no card network.
    expect(isCardNumber('1732262400000')).toBe(false);
    expect(isCardNumber('4111111111111112')).toBe(false);
    expect(isCardNumber('411111111111')).toBe(false);
  });

  it.each([
    ['email', 'write to jane.doe+billing@example.co.uk today', 'jane.doe+billing@example.co.uk', 'pii'],
    // Percent-encoded, as in a link, a Location header or a form body.
    ['email', 'https://crm.example/u?email=hidden.user%40corp.example&x=1', 'hidden.user%40corp.example', 'pii'],
    ['phone', 'call +44 20 7946 0958 now', '+44 20 7946 0958', 'pii'],
    ['phone', 'call (415) 555-2671 now', '(415) 555-2671', 'pii'],
    ['phone', 'call 415-555-2671.', '415-555-2671', 'pii'],
    // National numbers with their trunk prefix (the sweep's: UK landline and mobile), and others.
    ['phone', 'office 020 7946 0958 or', '020 7946 0958', 'pii'],
    ['phone', 'mobile 07700 900123.', '07700 900123', 'pii'],
    ['phone', 'Berlin (030) 1234 5678 ok', '(030) 1234 5678', 'pii'],
    ['phone', 'Paris 01 23 45 67 89 ok', '01 23 45 67 89', 'pii'],
    ['phone', 'Sydney 02-9876-5432 ok', '02-9876-5432', 'pii'],
    ['phone', 'from abroad 0044 20 7946 0958', '0044 20 7946 0958', 'pii'],
    ['us_ssn', 'ssn 123-45-6789 on file', '123-45-6789', 'pii'],
    ['us_ssn', 'ssn 123 45 6789 on file', '123 45 6789', 'pii'],
    ['us_ssn', 'row 7 123-45-6789', '123-45-6789', 'pii'],
    ['uk_nino', 'NI number AB 12 34 56 C here', 'AB 12 34 56 C', 'pii'],
    ['uk_nino', 'ni number ab123456c here', 'ab123456c', 'pii'],
    ['card_number', 'card 4111.1111.1111.1111 exp 12/30', '4111.1111.1111.1111', 'pci'],
    ['card_number', 'amex 3782.822463.10005 ok', '3782.822463.10005', 'pci'],
    ['card_number', 'card 4111 1111 1111 1111 exp 12/30', '4111 1111 1111 1111', 'pci'],
    ['card_number', 'ref 0 4000000000006 ok', '4000000000006', 'pci'],
  ])('finds %s in text', (name, text, value, cls) => {
    const f = detect(text);
    expect(f).toHaveLength(1);
    expect(f[0]).toMatchObject({ detector: name, value, class: cls });
  });

  it.each([
    'invoice INV-2024-0001 for 129.99 USD',
    'dated 2026-11-22T10:00:00.000Z',
    'order 1732262400000',
    'ssn-like but never issued 000-12-3456 and 666-12-3456 and 900-12-3456',
    'run_01JD7ZQ3ZK8M9W6Y0X5T2B4N1C and sql:table:invoices',
    'version 1.2.3 and ip 10.0.0.1',
    'a discount of 15%40 days later, 100%40x',
    // One kind of separator per SSN; dots beside other separators are decimals, not a card.
    'codes 123-45 6789 and 4111.1111 1111.1111 1.1',
    'nino-like with a prefix never issued: gb123456a, QQ 12 34 56 E',
    // Dotted numbers that are not card-shaped, and spaced numbers in a row.
    'ldap syntax 1.3.6.1.4.1.1466.115.121.1.15 and oid 1.3.6.1.4.1.41111.1111.1111.1',
    'ls: 512 64 1024 2048 and 7 123 45 6789',
    // Leading-zero numbers that are not phones: dates, times, versions, short codes, amounts.
    'on 01.02.2026 at 09:30, build 0.12.3, code 012-345, paid 0.50 and 0 15 EUR',
    'INV-0012-3456 and room 02-14 and 01/02/2026',
    // A date and a time, or mixed separators, are not one national number.
    'Meeting 01.02.2026 10:30, again 05.03.2026 09:15 and 01-02-2026 1430; years 01-1999 02-2000',
  ])('finds nothing in ordinary text: %s', (text) => {
    expect(detect(text)).toEqual([]);
  });

  it('detect resolves overlaps, findAll keeps them', () => {
    const text = 'x 4111111111111111@example.com';
    expect(findAll(text).length).toBeGreaterThan(detect(text).length);
    expect(detect(text)).toHaveLength(1);
  });
});

describe('detectors take time linear in the text (a stalled boundary stops the heartbeats)', () => {
  // Each of these took seconds to minutes before the detectors were fixed (quadratic rescans);
  // linear, they take well under a second. The bound is far from both.
  const cases: Array<[string, string, number]> = [
    ['letters', 'a'.repeat(600_000), 0],
    ['digits', '7'.repeat(600_000), 0],
    ['hex', Array.from({ length: 200_000 }, (_, i) => '0123456789abcdef'[(i * 7) % 16]).join(''), 0],
    ['1-1-1-', '1-'.repeat(300_000), 0],
    ['4-4-4-', '4-'.repeat(300_000), 17_647],
    ['cards', '4111 1111 1111 1111 '.repeat(20_000), 20_000],
  ];
  for (const [name, text, cards] of cases) {
    it(`${name}: ${text.length.toLocaleString('en')} characters`, () => {
      const t0 = performance.now();
      const found = findAll(text);
      expect(performance.now() - t0).toBeLessThan(10_000);
      expect(found.filter((f) => f.detector === 'card_number')).toHaveLength(cards);
    });
  }
});

describe('redaction (I 5.5: ungranted content replaced by [REDACTED:<class>])', () => {
  const descriptors = [
    { id: 'billing.lookup_invoice', data_classes: { email: 'pii', name: 'pii' } },
    { id: 'billing.cards', data_classes: { 'card.number': 'pci' } },
    { id: 'broken', data_classes: null as unknown as Record<string, string> },
  ];
  const fieldClasses = fieldClassesOf(descriptors);

  it('reads field classes from descriptors', () => {
    expect(fieldClasses).toEqual({ email: 'pii', name: 'pii', 'card.number': 'pci' });
  });

  it('replaces classified fields whole and reports path and count', () => {
    const result = { rows: [{ id: 'INV-1', name: 'Jane Doe', email: 'jane@example.com', amount: 120 }] };
    const r = redactValue(result, { grants: [], fieldClasses }, '/calls/1/result');
    expect(r.value).toEqual({ rows: [{ id: 'INV-1', name: '[REDACTED:pii]', email: '[REDACTED:pii]', amount: 120 }] });
    expect(r.redactions).toEqual(
      expect.arrayContaining([
        { class: 'pii', path: '/calls/1/result/rows/0/name', count: 1 },
        { class: 'pii', path: '/calls/1/result/rows/0/email', count: 1 },
      ]),
    );
    expect(r.redactions).toHaveLength(2);
    expect(result.rows[0]!.email).toBe('jane@example.com'); // input untouched
  });

  it('granted classes pass; other classes inside them are still redacted', () => {
    const v = { email: 'jane@example.com', note: 'card 4111111111111111' };
    const r = redactValue(v, { grants: ['pii'], fieldClasses });
    expect(r.value).toEqual({ email: 'jane@example.com', note: 'card [REDACTED:pci]' });
    expect(r.redactions).toEqual([{ class: 'pci', path: '/note', count: 1 }]);
    const all = redactValue(v, { grants: ['pii', 'pci'], fieldClasses });
    expect(all.value).toEqual(v);
    expect(all.redactions).toEqual([]);
  });

  it('counts several findings in one string at one path', () => {
    const r = redactValue({ body: 'a@x.io, b@y.io and c@z.io' }, { grants: [] });
    expect(r.value).toEqual({ body: '[REDACTED:pii], [REDACTED:pii] and [REDACTED:pii]' });
    expect(r.redactions).toEqual([{ class: 'pii', path: '/body', count: 3 }]);
  });

  it('dotted field classes match the end of the path only', () => {
    const v = { card: { number: '12', brand: 'visa' }, number: 7 };
    const r = redactValue(v, { grants: [], fieldClasses });
    expect(r.value).toEqual({ card: { number: '[REDACTED:pci]', brand: 'visa' }, number: 7 });
  });

  it('field names compare case-insensitively and objects under a class go whole', () => {
    const r = redactValue({ Email: { primary: 'x' } }, { grants: [], fieldClasses });
    expect(r.value).toEqual({ Email: '[REDACTED:pii]' });
  });

  it('redacts object keys and numbers that are card numbers', () => {
    const r = redactValue({ 'jane@example.com': { pan: 4111111111111111 } }, { grants: [] });
    expect(r.value).toEqual({ '[REDACTED:pii]': { pan: '[REDACTED:pci]' } });
    expect(r.redactions).toEqual(
      expect.arrayContaining([
        { class: 'pii', path: '/[REDACTED:pii]', count: 1 },
        { class: 'pci', path: '/[REDACTED:pii]/pan', count: 1 },
      ]),
    );
  });

  it('digits that read as a card number are pci even when they run across granted pii', () => {
    // Two SSNs and a digit between them: 2500 1100 1407 566… has a Mastercard prefix and a valid
    // Luhn sum, so the safe reading wins and the card-shaped run goes, pii granted or not.
    expect(redactText(' 001-25-0001 1 001-40-7566 ', { grants: ['pii'] }, '/t').value).toBe(' 001-[REDACTED:pci] ');
    expect(redactText(' 001-25-0001 | 1 | 001-40-7566 ', { grants: ['pii'] }, '/t').value).toBe(' 001-25-0001 | 1 | 001-40-7566 ');
  });

  it('a value read out of a classified field (names) is classified too', () => {
    const r = redactValue('Jane Doe', { grants: [], fieldClasses }, '/steps/lookup/output/rows/0/name', ['rows', 'name']);
    expect(r.value).toBe('[REDACTED:pii]');
    expect(r.redactions).toEqual([{ class: 'pii', path: '/steps/lookup/output/rows/0/name', count: 1 }]);
  });

  it('a literal found once is removed wherever it appears later (DataBoundary memory)', () => {
    const b = new DataBoundary({ grants: [], fieldClasses });
    const first = b.redact({ rows: [{ name: 'Jane Doe', email: 'jane@example.com' }] }, '/calls/1/result');
    expect(first.value).toEqual({ rows: [{ name: '[REDACTED:pii]', email: '[REDACTED:pii]' }] });
    const later = b.redact({ note: 'Jane Doe wrote from jane@example.com about INV-1' }, '/calls/2/result');
    expect(later.value).toEqual({ note: '[REDACTED:pii] wrote from [REDACTED:pii] about INV-1' });
    expect(later.redactions).toEqual([{ class: 'pii', path: '/calls/2/result/note', count: 2 }]);
  });

  it("an http tool's raw body beside its json: the classified values are withheld there too, however the upstream escaped them (I 5.5)", () => {
    const classes = { full_name: 'pii', api_key: 'secret' };
    // As Python (ensure_ascii) and PHP (\/) write JSON; also escaped once more, as JSON text inside JSON.
    const raw = '{"full_name":"Ren\\u00e9e Dupont-Okafor","api_key":"sk_live_ABC\\/DEF123456XYZ","note":"ok"}';
    const result = { status: 200, json: JSON.parse(raw), body: raw, nested: JSON.stringify(raw) };
    const r = redactValue(result, { grants: [], fieldClasses: classes }, '/calls/2/result');
    expect(r.value).toMatchObject({ json: { full_name: '[REDACTED:pii]', api_key: '[REDACTED:secret]', note: 'ok' } });
    const value = r.value as typeof result;
    expect(value.body).toBe('{"full_name":"[REDACTED:pii]","api_key":"[REDACTED:secret]","note":"ok"}');
    expect(value.nested).toBe(JSON.stringify('{"full_name":"[REDACTED:pii]","api_key":"[REDACTED:secret]","note":"ok"}'));
    expect(r.redactions).toEqual(expect.arrayContaining([{ class: 'pii', path: '/calls/2/result/body', count: 1 }, { class: 'secret', path: '/calls/2/result/body', count: 1 }]));
    // A built-in detector finds an email behind escapes too.
    const mail = redactValue({ body: '{"from":"alice\\u0040example.com"}' }, { grants: [], fieldClasses: {} });
    expect((mail.value as { body: string }).body).toBe('{"from":"[REDACTED:pii]"}');
  });

  it('short and numeric classified values in an http body beside its json are withheld by their field name, not only in json (I 5.5)', () => {
    const classes = { salary: 'secret_field', code: 'secret_field', active: 'secret_field', ref: 'secret_field' };
    const raw = '{"name":"Dana","salary":95000,"code":"X7Q","active":true,"ref":"A-1","rows":[{"salary":12}]}';
    const r = redactValue({ status: 200, json: JSON.parse(raw), body: raw }, { grants: [], fieldClasses: classes }, '/calls/0/result');
    const body = JSON.parse((r.value as { body: string }).body);
    expect(body).toEqual({ name: 'Dana', salary: '[REDACTED:secret_field]', code: '[REDACTED:secret_field]', active: '[REDACTED:secret_field]', ref: '[REDACTED:secret_field]', rows: [{ salary: '[REDACTED:secret_field]' }] });
    expect(r.redactions).toEqual(expect.arrayContaining([{ class: 'secret_field', path: '/calls/0/result/body', count: 5 }]));
    // JSON text a parse would change is matched as text: a card number past 2^53 written as a
    // number stays whole for the card detector (a rewrite would round it to 16 real digits).
    const card = '{"salary":95000,"card":6011000990139424124}';
    const kept = redactValue({ body: card }, { grants: [], fieldClasses: classes });
    expect((kept.value as { body: string }).body).toBe('{"salary":95000,"card":[REDACTED:pci]}');
    // Text that is not JSON, or JSON with nothing classified, is left as it was written.
    const plain = redactValue({ body: '{ "name": "Dana" }', note: 'salary 95000' }, { grants: [], fieldClasses: classes });
    expect(plain.value).toEqual({ body: '{ "name": "Dana" }', note: 'salary 95000' });
  });

  it('short or purely small-number classified values are not scrubbed elsewhere', () => {
    const b = new DataBoundary({ grants: [], fieldClasses: { age: 'pii', name: 'pii' } });
    const r = b.redact({ age: 42, name: 'Al', text: 'Al is 42 and owes 42 USD' });
    expect(r.value).toEqual({ age: '[REDACTED:pii]', name: '[REDACTED:pii]', text: 'Al is 42 and owes 42 USD' });
  });

  it('escapes JSON-pointer tokens in paths', () => {
    const r = redactValue({ 'a/b': { '~c': 'x@y.io' } }, { grants: [] });
    expect(r.redactions).toEqual([{ class: 'pii', path: '/a~1b/~0c', count: 1 }]);
  });

  it('redactText reports at the given path', () => {
    const r = redactText('mail jane@example.com or call 415-555-2671', { grants: [] }, '/prompt');
    expect(r.value).toBe('mail [REDACTED:pii] or call [REDACTED:pii]');
    expect(r.redactions).toEqual([{ class: 'pii', path: '/prompt', count: 2 }]);
  });

  it('the note payload carries class, path and count, never the content', () => {
    const r = redactValue({ email: 'jane@example.com' }, { grants: [], fieldClasses });
    const note = redactionNote(r.redactions[0]!, { step: 'triage' });
    expect(note).toEqual({ type: 'redaction', class: 'pii', path: '/email', count: 1, step: 'triage' });
    expect(JSON.stringify(note)).not.toContain('jane');
  });
});

// ---------------------------------------------------------------- properties

const label = fc.stringMatching(/^[a-z][a-z0-9]{0,7}$/);
const emailArb = fc.tuple(label, label, fc.constantFrom('com', 'io', 'co.uk', 'example')).map(([u, d, t]) => `${u}@${d}.${t}`);
const cardArb = fc
  .tuple(fc.constantFrom('4', '51', '55', '37', '6011', '2221'), fc.integer({ min: 13, max: 19 }), fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 19, maxLength: 19 }))
  .map(([prefix, len, digits]) => {
    const body = (prefix + digits.join('')).slice(0, len - 1);
    for (let check = 0; check < 10; check++) if (luhnValid(body + check)) return body + check;
    return body + '0';
  });
const ssnArb = fc
  .tuple(fc.integer({ min: 1, max: 899 }), fc.integer({ min: 1, max: 99 }), fc.integer({ min: 1, max: 9999 }))
  .filter(([a]) => a !== 666)
  .map(([a, b, c]) => `${String(a).padStart(3, '0')}-${String(b).padStart(2, '0')}-${String(c).padStart(4, '0')}`);
const phoneArb = fc.tuple(fc.integer({ min: 200, max: 999 }), fc.integer({ min: 200, max: 999 }), fc.integer({ min: 0, max: 9999 })).map(([a, b, c]) => `(${a}) ${b}-${String(c).padStart(4, '0')}`);
const secretArb = fc.oneof(
  emailArb.map((v) => ({ v, cls: 'pii' })),
  cardArb.map((v) => ({ v, cls: 'pci' })),
  ssnArb.map((v) => ({ v, cls: 'pii' })),
  phoneArb.map((v) => ({ v, cls: 'pii' })),
);
const filler = fc.string({ maxLength: 12 });
// " | " around each secret ends any digit run: without it, neighbours such as "001-25-0001 1
// 001-40-7566" join into a Luhn-valid card number with a card prefix, which the boundary rightly
// redacts as pci even when pii is granted (seed -700102051 found that).
const textWithSecrets = fc.array(fc.tuple(filler, secretArb), { minLength: 1, maxLength: 4 }).map((parts) => ({
  text: parts.map(([f, s]) => `${f} | ${s.v} | `).join(''),
  secrets: parts.map(([, s]) => s),
}));
const jsonWithText = (leaf: fc.Arbitrary<unknown>) =>
  fc.letrec<{ node: unknown }>((tie) => ({
    node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 6 }), tie('node'), { maxKeys: 3 })),
  })).node;

/** Every string, number and object key inside a JSON value. */
function collectStrings(v: unknown, out: string[] = []): string[] {
  if (typeof v === 'string' || typeof v === 'number') out.push(String(v));
  else if (Array.isArray(v)) v.forEach((x) => collectStrings(x, out));
  else if (v && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) {
      out.push(k);
      collectStrings(x, out);
    }
  return out;
}

describe('properties of the boundary (I 5.5)', () => {
  const grantSets = fc.subarray(['pii', 'pci']);

  it('output never contains a detected value of an ungranted class', () => {
    fc.assert(
      fc.property(jsonWithText(fc.oneof(textWithSecrets.map((t) => t.text), fc.string(), fc.integer())), grantSets, (value, grants) => {
        const r = redactValue(value, { grants });
        const ungranted = BUILTIN_DETECTORS.filter((d) => !grants.includes(d.class));
        // Every value any ungranted detector finds in the input is gone from the output...
        const before = collectStrings(value).flatMap((s) => findAll(s, ungranted).map((f) => f.value));
        const after = collectStrings(r.value);
        for (const secret of before) expect(after.filter((s) => s.includes(secret))).toEqual([]);
        // ...and nothing an ungranted detector would find is left anywhere.
        for (const s of collectStrings(r.value)) expect(findAll(s, ungranted)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('planted secrets of ungranted classes never survive, granted ones always do', () => {
    fc.assert(
      fc.property(textWithSecrets, grantSets, ({ text, secrets }, grants) => {
        const r = redactText(text, { grants }, '/t');
        for (const s of secrets) {
          if (grants.includes(s.cls)) expect(r.value).toContain(s.v);
          else expect(r.value).not.toContain(s.v);
        }
        const total = r.redactions.reduce((n, x) => n + x.count, 0);
        expect(total).toBeGreaterThanOrEqual(secrets.filter((s) => !grants.includes(s.cls)).length > 0 ? 1 : 0);
        for (const x of r.redactions) expect(grants).not.toContain(x.class);
      }),
      { numRuns: 500 },
    );
  });

  it('is idempotent: redacting twice changes nothing more and reports nothing', () => {
    fc.assert(
      fc.property(jsonWithText(fc.oneof(textWithSecrets.map((t) => t.text), fc.string())), grantSets, (value, grants) => {
        const once = redactValue(value, { grants });
        const twice = redactValue(once.value, { grants });
        expect(twice.value).toEqual(once.value);
        expect(twice.redactions).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('markers name only ungranted classes', () => {
    fc.assert(
      fc.property(textWithSecrets, grantSets, ({ text }, grants) => {
        const r = redactText(text, { grants });
        for (const m of r.value.matchAll(/\[REDACTED:([a-z]+)\]/g)) expect(grants).not.toContain(m[1]);
        expect(marker('pii')).toBe('[REDACTED:pii]');
      }),
      { numRuns: 200 },
    );
  });
});

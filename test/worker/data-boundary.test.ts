// Interface 5.5 (grants and the data boundary): detectors, field classes from tool descriptors,
// redaction paths and counts, and the property that nothing of an ungranted class gets through.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataBoundary, fieldClassesOf, marker, redactText, redactValue, redactionNote, scrubbable } from '../../src/worker/data-boundary.js';
import { BUILTIN_DETECTORS, detect, findAll, isCardNumber, luhnValid } from '../../src/worker/detectors.js';
import { LiteralSet } from '../../src/worker/literal-set.js';

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
    // Grouped by no-break spaces (HTML's &nbsp;, French number formatting) or narrow ones: the
    // value is the text as written, so the same spelling is scrubbed wherever it appears.
    ['card_number', 'carte 4111\u00a01111\u00a01111\u00a01111 ok', '4111\u00a01111\u00a01111\u00a01111', 'pci'],
    ['card_number', 'carte 4111\u202f1111\u202f1111\u202f1111 ok', '4111\u202f1111\u202f1111\u202f1111', 'pci'],
    ['phone', 'Paris 01\u00a023\u00a045\u00a067\u00a089 ok', '01\u00a023\u00a045\u00a067\u00a089', 'pii'],
    // …and by the entities an http tool's raw HTML body carries.
    ['card_number', '<td>4111&nbsp;1111&nbsp;1111&nbsp;1111</td>', '4111&nbsp;1111&nbsp;1111&nbsp;1111', 'pci'],
    ['card_number', 'carte 4111&#160;1111&#xA0;1111&#8239;1111.', '4111&#160;1111&#xA0;1111&#8239;1111', 'pci'],
    ['phone', 'tel 01&NBSP;23&nbsp;45&nbsp;67&nbsp;89 ok', '01&NBSP;23&nbsp;45&nbsp;67&nbsp;89', 'pii'],
    // An entity before a finding moves its offsets in the text, not in the view.
    ['email', 'a&nbsp;b&nbsp;c write to dana@example.com', 'dana@example.com', 'pii'],
    // Internationalized addresses (RFC 6531): letters of any script, composed or not.
    ['email', 'mail dana@bücher.de today', 'dana@bücher.de', 'pii'],
    ['email', 'mail dänä@corp.example today', 'dänä@corp.example', 'pii'],
    ['email', 'mail da\u0308na@corp.example today', 'da\u0308na@corp.example', 'pii'],
    ['email', 'почта иван@пример.рф сегодня', 'иван@пример.рф', 'pii'],
    // Through the detectors' view, withheld as written: an extension, full-width forms,
    // hyphens and dashes, runs of spaces and tabs, form and percent encodings, dotted SSNs,
    // dashed NINOs, an HTML-entity @.
    ['phone', 'call 415-555-0100x23 now', '415-555-0100x23', 'pii'],
    ['phone', 'call 415-555-0100 ext. 23', '415-555-0100 ext. 23', 'pii'],
    ['phone', '電話 ０９０－１２３４－５６７８ まで', '０９０－１２３４－５６７８', 'pii'],
    ['card_number', 'card ４１１１ １１１１ １１１１ １１１１', '４１１１ １１１１ １１１１ １１１１', 'pci'],
    ['card_number', 'card 4111\u20111111\u20111111\u20111111', '4111\u20111111\u20111111\u20111111', 'pci'],
    ['card_number', 'card 4111\u20131111\u20131111\u20131111', '4111\u20131111\u20131111\u20131111', 'pci'],
    ['card_number', 'card 4111  1111  1111  1111', '4111  1111  1111  1111', 'pci'],
    ['card_number', 'card\t4111\t1111\t1111\t1111', '4111\t1111\t1111\t1111', 'pci'],
    ['card_number', 'pan=4111+1111+1111+1111&x=1', '4111+1111+1111+1111', 'pci'],
    ['card_number', 'pan=4111%201111%201111%201111', '4111%201111%201111%201111', 'pci'],
    ['phone', 'tel:%2B14155550123', '%2B14155550123', 'pii'],
    ['us_ssn', 'ssn 219.09.9999 on file', '219.09.9999', 'pii'],
    ['uk_nino', 'NI AB-12-34-56-C', 'AB-12-34-56-C', 'pii'],
    ['email', 'mail ops.lead&#64;corp.example', 'ops.lead&#64;corp.example', 'pii'],
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

  it('the readings above do not make numbers of what is none: versions, sums, dates, spaced prices', () => {
    for (const text of ['version 1.2.3 and 10.20.30.40', '2+2=4 and 12+34', 'total: 200+300+1000 = 1500', 'sum 123+45+6789', 'price 12  34', 'at 10:30 on 01.02.2026', 'x&amp;y %2B1 %2D', 'row\t12\t34\t56']) expect(detect(text), text).toEqual([]);
  });

  it("an email keeps its own '+' and '%20': withheld whole, never cut where a card would read a space", () => {
    for (const email of ['john2024+1@gmail.com', 'a1+22@corp.example', 'user%20name@x.com']) {
      expect(detect(`contact ${email} today`).map((f) => f.value), email).toEqual([email]);
      expect(redactText(`contact ${email} today`, { grants: [] }).value).toBe('contact [REDACTED:pii] today');
    }
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
    ['spaces and entities', '1 &nbsp; %20\u3000\t'.repeat(60_000), 0],
    ['full-width cards', '４１１１－１１１１－１１１１－１１１１ '.repeat(20_000), 20_000],
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

  it('a card grouped by &nbsp; in an http body is withheld where it stands, entities and all (I 5.5)', () => {
    const body = '<tr><td>Dana</td><td>4111&nbsp;1111&nbsp;1111&nbsp;1111</td><td>exp&nbsp;12/30</td></tr>';
    expect(redactValue({ body }, { grants: [] }).value).toEqual({ body: '<tr><td>Dana</td><td>[REDACTED:pci]</td><td>exp&nbsp;12/30</td></tr>' });
  });

  it('a field two tools class differently is withheld unless every class is granted (hr.lookup salary: hr, payroll.summary salary: finance)', () => {
    const classes = fieldClassesOf([
      { id: 'hr.lookup', data_classes: { salary: 'hr' } },
      { id: 'payroll.summary', data_classes: { salary: 'finance' } },
      { id: 'payroll.detail', data_classes: { salary: 'hr' } },
    ]);
    expect(classes).toEqual({ salary: ['hr', 'finance'] });
    // A descriptor's JSON may name a field `__proto__`: kept as a field, not a prototype.
    expect(Object.entries(fieldClassesOf([{ data_classes: JSON.parse('{"salary":"hr","__proto__":"pii"}') }]))).toEqual([['salary', 'hr'], ['__proto__', 'pii']]);
    const row = { name: 'Dana', salary: 95000 };
    expect(redactValue(row, { grants: ['finance'], fieldClasses: classes }, '/calls/1/result').value).toEqual({ name: 'Dana', salary: '[REDACTED:hr]' });
    expect(redactValue(row, { grants: ['hr'], fieldClasses: classes }).value).toEqual({ name: 'Dana', salary: '[REDACTED:finance]' });
    expect(redactValue(row, { grants: ['hr', 'finance'], fieldClasses: classes }).value).toEqual(row);
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
    // JSON text a plain parse would change is read without loss: a card number past 2^53
    // written as a number keeps its 19 digits (as a string) for the card detector, where
    // JSON.parse would round it to 16 real digits no detector knows; the salary beside it is
    // withheld by its name (it was matched as text, and reached the model, before 2026-12).
    const card = '{"salary":95000,"card":6011000990139424124}';
    const kept = redactValue({ body: card }, { grants: [], fieldClasses: classes });
    expect((kept.value as { body: string }).body).toBe('{"salary":"[REDACTED:secret_field]","card":"[REDACTED:pci]"}');
    // Text that is not JSON, or JSON with nothing classified, is left as it was written.
    const plain = redactValue({ body: '{ "name": "Dana" }', note: 'salary 95000' }, { grants: [], fieldClasses: classes });
    expect(plain.value).toEqual({ body: '{ "name": "Dana" }', note: 'salary 95000' });
  });

  it('a literal is removed elsewhere from four characters with a letter, or seven digits, counted trimmed (svc-worker(1), I 5.5)', () => {
    expect(scrubbable('Dana')).toBe(true);
    expect(scrubbable('Dan')).toBe(false);
    expect(scrubbable('  Al  ')).toBe(false); // the padding of a CHAR(n) column is no part of the name
    expect(scrubbable('1234567')).toBe(true);
    expect(scrubbable('123456')).toBe(false);
    expect(scrubbable('12-34-56')).toBe(false); // eight characters, six digits, no letter
    expect(scrubbable('a@b.c')).toBe(true);
    const b = new DataBoundary({ grants: [], fieldClasses: { account_no: 'pii' } });
    const r = b.redact({ account_no: 1234567, note: 'paid from 1234567 and 123456' });
    expect(r.value).toEqual({ account_no: '[REDACTED:pii]', note: 'paid from [REDACTED:pii] and 123456' });
  });

  it('a detector that keeps matching its own marker gets the whole string withheld, never a loop or a leak', () => {
    const greedy = { name: 'greedy', class: 'secret', pattern: /REDACTED|sk_\w+/g };
    const r = redactText('key sk_live_1 here', { grants: [], detectors: [greedy] }, '/t');
    expect(r.value).toBe('[REDACTED:secret]');
    expect(r.redactions).toEqual([{ class: 'secret', path: '/t', count: expect.any(Number) }]);
  });

  it('short or purely small-number classified values are not scrubbed elsewhere', () => {
    const b = new DataBoundary({ grants: [], fieldClasses: { age: 'pii', name: 'pii' } });
    const r = b.redact({ age: 42, name: 'Al', text: 'Al is 42 and owes 42 USD' });
    expect(r.value).toEqual({ age: '[REDACTED:pii]', name: '[REDACTED:pii]', text: 'Al is 42 and owes 42 USD' });
  });

  it('redactStrings (schemas): keys and numbers lose detected values too, and JSON text in a string is not read as data', () => {
    const b = new DataBoundary({ grants: [], fieldClasses: { email: 'pii' } });
    const r = b.redactStrings({ properties: { 'maria.lopez@corp.example': { type: 'string' }, email: { type: 'string', description: '{"email": "string"}' } }, examples: [4111111111111111], required: ['maria.lopez@corp.example'] }, '/s');
    expect(r.value).toEqual({ properties: { '[REDACTED:pii]': { type: 'string' }, email: { type: 'string', description: '{"email": "string"}' } }, examples: ['[REDACTED:pci]'], required: ['[REDACTED:pii]'] });
    // "string" was not learned as a secret from the quoted {"email": "string"}.
    expect(b.redact({ note: 'type string' }).value).toEqual({ note: 'type string' });
    expect(b.knownCount).toBe(0);
  });

  it('scrubKnownIn: a learned literal leaves numbers too (an id the model passed as an integer), which keep their type otherwise', () => {
    const b = new DataBoundary({ grants: [], fieldClasses: { account_no: 'pii' } });
    b.redact({ account_no: 88812345 });
    expect(b.scrubKnownIn({ acct: 88812345, acct_s: 'no 88812345', other: 42, examples: [88812345] }).value).toEqual({ acct: '[REDACTED:pii]', acct_s: 'no [REDACTED:pii]', other: 42, examples: ['[REDACTED:pii]'] });
  });

  it('a classified value padded with spaces (a CHAR(n) column) is learned trimmed as well', () => {
    const b = new DataBoundary({ grants: [], fieldClasses: { customer_name: 'pii' } });
    b.redact({ customer_name: 'Philippa Stroud-Kenning   ' });
    expect(b.scrubKnown('hi from Philippa Stroud-Kenning.').value).toBe('hi from [REDACTED:pii].');
  });

  it('a classified value that is part of a marker ("REDACTED" masked upstream, a name "REDA") is removed elsewhere, and never withholds a marker again', () => {
    const b = new DataBoundary({ grants: [], fieldClasses: { customer_name: 'pii' } });
    expect(b.redact({ customer_name: 'REDACTED', note: 'call jane@example.com' }).value).toEqual({ customer_name: '[REDACTED:pii]', note: 'call [REDACTED:pii]' });
    // Markers already written stay markers; the text around them stays too.
    expect(b.scrubKnown('Ticket: refund [REDACTED:pii] please').value).toBe('Ticket: refund [REDACTED:pii] please');
    expect(b.redact({ text: 'seen: [REDACTED:pii] and more' }).value).toEqual({ text: 'seen: [REDACTED:pii] and more' });
    b.redact({ customer_name: 'REDA' });
    expect(b.redact({ note: 'hello REDA, [REDACTED:pii]' }).value).toEqual({ note: 'hello [REDACTED:pii], [REDACTED:pii]' });
    expect(b.scrubKnown('later msg: REDA! [REDACTED:unknown]').value).toBe('later msg: [REDACTED:pii]! [REDACTED:unknown]');
    // Only this boundary's own markers are markers: a fake one around a secret is no hiding place.
    expect(b.scrubKnown('[REDACTED:REDA]').value).toBe('[[REDACTED:pii]:[REDACTED:pii]]'); // "REDACTED" was learned too
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

describe('JSON text that JSON.parse alone does not read exactly (I 5.5: the boundary fails closed)', () => {
  // An http tool's result ({status, body, json}) or an fs read ({content}): each shape below
  // reached the model with its classified fields in clear when matched as text (the sweep's
  // five, 2026-12), since only the detectors and literals seen before apply to text.
  const classes = { customer_name: 'pii', salary: 'hr' };
  const policy = { grants: [] as string[], fieldClasses: classes };
  const bodyOf = (raw: string, json: unknown = null) => {
    const r = redactValue({ status: 200, body: raw, json }, policy, '/calls/0/result');
    return { body: (r.value as { body: string }).body, redactions: r.redactions.filter((x) => x.path === '/calls/0/result/body') };
  };

  it('a byte order mark before the JSON (the http json twin is null then): read past it, handed on without it', () => {
    const { body, redactions } = bodyOf('\uFEFF{"customer_name":"Dana Xu","salary":95000,"city":"Oslo"}');
    expect(body).toBe('{"customer_name":"[REDACTED:pii]","salary":"[REDACTED:hr]","city":"Oslo"}');
    expect(redactions).toEqual(expect.arrayContaining([{ class: 'pii', path: '/calls/0/result/body', count: 1 }, { class: 'hr', path: '/calls/0/result/body', count: 1 }]));
  });

  it('an integer past 2^53 anywhere in the document: read without loss, kept as its digits when the text is rewritten', () => {
    const raw = '{"rows":[{"customer_name":"Dana Xu","salary":95000}],"meta":{"cursor":1466000000000000001,"total":-99999999999999999999}}';
    const { body, redactions } = bodyOf(raw, JSON.parse(raw));
    expect(body).toBe('{"rows":[{"customer_name":"[REDACTED:pii]","salary":"[REDACTED:hr]"}],"meta":{"cursor":"1466000000000000001","total":"-99999999999999999999"}}');
    expect(redactions).toHaveLength(2);
    // Nothing withheld: the text goes on as it was written, its numbers untouched.
    const none = '{"salary_band":"B","id":1466000000000000001}';
    expect(redactValue({ body: none }, policy).value).toEqual({ body: none });
  });

  it('NDJSON: each line read as its own JSON text, the lines joined again', () => {
    const raw = '{"customer_name":"Dana Xu","salary":95000}\r\n{"event":"login","at":1}\r\n{"salary":87000,"id":1466000000000000001}\r\n\r\n{"customer_name":"Eli M';
    const { body, redactions } = bodyOf(raw);
    expect(body).toBe('{"customer_name":"[REDACTED:pii]","salary":"[REDACTED:hr]"}\r\n{"event":"login","at":1}\r\n{"salary":"[REDACTED:hr]","id":"1466000000000000001"}\r\n\r\n[REDACTED:pii]');
    // The last line, cut short, is withheld as the class it names; the others by field.
    expect(redactions).toEqual(expect.arrayContaining([{ class: 'pii', path: '/calls/0/result/body', count: 2 }, { class: 'hr', path: '/calls/0/result/body', count: 2 }]));
    const content = redactValue({ path: 'people.jsonl', content: '{"salary":1}\n{"salary":2}\n' }, policy).value as { content: string };
    expect(content.content).toBe('{"salary":"[REDACTED:hr]"}\n{"salary":"[REDACTED:hr]"}\n');
  });

  it('a lone surrogate escape (an emoji cut in two): JSON.parse keeps it exactly, so the document is read and the escape written back', () => {
    const raw = '{"review":"Great product \\ud83d","customer_name":"Dana Xu","salary":95000}';
    const { body } = bodyOf(raw, JSON.parse(raw));
    expect(body).toBe('{"review":"Great product \\ud83d","customer_name":"[REDACTED:pii]","salary":"[REDACTED:hr]"}');
    const name = '{"\\udc00":1,"salary":95000}';
    expect(bodyOf(name).body).toBe('{"\\udc00":1,"salary":"[REDACTED:hr]"}');
  });

  it('numbers out of a double\'s range are kept as written too (1e400 would be written back as null); NDJSON may open with a scalar', () => {
    expect(bodyOf('{"salary":95000,"n":1e400,"m":1e-400,"k":0.0e5}').body).toBe('{"salary":"[REDACTED:hr]","n":"1e400","m":"1e-400","k":0}');
    expect(bodyOf('1\n{"salary":95000}\n"done"').body).toBe('1\n{"salary":"[REDACTED:hr]"}\n"done"');
    // An array opening with a number of any length is JSON text too.
    const long = '1'.repeat(70);
    expect(bodyOf(`[${long}, {"salary":95000}]`).body).toBe(`["${long}",{"salary":"[REDACTED:hr]"}]`);
    expect(bodyOf('[1e400, {"salary":95000}]').body).toBe('["1e400",{"salary":"[REDACTED:hr]"}]');
    // Lines opening with a JSON scalar that cannot all be read: withheld whole, not matched as text.
    for (const text of ['1\n{"salary":95000}\nnot json\n{"salary":87000}', '"hdr"\n{\n "salary": 95000\n}']) {
      expect(bodyOf(text).body).toBe('[REDACTED:hr]');
    }
  });

  it('a classified name an upstream escaped (as JSON.parse reads it) is found too', () => {
    expect(bodyOf('{"sal\\u0061ry":95000,"city":"Oslo"}').body).toBe('{"salary":"[REDACTED:hr]","city":"Oslo"}');
    expect(bodyOf('{"sal\\u0061ry":95000,"city":"Os').body).toBe('[REDACTED:hr]');
  });

  it.each([
    [")]}'\n", ''],
    [")]}',\n", ''],
    ['while(1);', ''],
    ['for(;;);', ''],
  ])('an XSSI prefix %j before the JSON: read past it, handed on without it', (prefix) => {
    const { body, redactions } = bodyOf(`${prefix}[{"customer_name":"Dana Xu","salary":95000}]`);
    expect(body).toBe('[{"customer_name":"[REDACTED:pii]","salary":"[REDACTED:hr]"}]');
    expect(redactions).toHaveLength(2);
  });

  it.each([
    ['a repeated member name (JSON.parse keeps the last)', '{"salary":95000,"salary":1}', 'hr'],
    ['JSON cut short', '{"customer_name":"Dana Xu","salary":950', 'pii'],
    ['two documents on one line', '{"salary":95000}{"salary":1}', 'hr'],
    ['JSON followed by more', '{"salary":95000} and more', 'hr'],
    ['a pretty-printed document cut short (not read line by line)', '{\n  "salary":\n    95000,\n  "rows": [\n', 'hr'],
    ['NDJSON with a broken line before the last', '{"a":1}\n{"salary":95000,\n{"b":2}', 'hr'],
    ['a BOM before JSON cut short', '\uFEFF[{"salary":95000},', 'hr'],
  ])('%s: withheld whole as the class it names, reported like any redaction', (_, raw, cls) => {
    const { body, redactions } = bodyOf(raw);
    expect(body).toBe(`[REDACTED:${cls}]`);
    expect(redactions).toEqual([{ class: cls, path: '/calls/0/result/body', count: 1 }]);
  });

  it('withheld whole as unknown when the name it names first stands for several classes; its literals are still noted', () => {
    const ambiguous = { 'card.number': 'pci', 'phone.number': 'pii' };
    const r = redactValue({ body: '{"card":{"number":"X7Q"' }, { grants: [], fieldClasses: ambiguous });
    expect(r.value).toEqual({ body: '[REDACTED:unknown]' });
    expect(r.redactions).toEqual([{ class: 'unknown', path: '/body', count: 1 }]);
    // A repeated name: what JSON.parse read is still noted, so the name goes elsewhere too.
    const b = new DataBoundary(policy);
    b.redact({ body: '{"customer_name":"Dana Xu","customer_name":"Dana Xu","x":1}' });
    expect(b.redact({ note: 'ask Dana Xu' }).value).toEqual({ note: 'ask [REDACTED:pii]' });
  });

  it('text naming no classified field is left alone, whatever its shape; so is prose quoting a classified name', () => {
    const texts = [
      '\uFEFF{"city":"Oslo","amount":95000}',
      '{"id":1466000000000000001,"amount":95000}',
      '{"city":"Oslo"}\n{"city":"Bergen"}\n{"city":"Tr',
      '{"review":"Great product \\ud83d","amount":95000}',
      ")]}'\n{\"city\":\"Oslo\"}",
      '{"amount":95000,"amount":1}',
      '{"city":"Oslo","amount":950',
      // Prose (a rendered prompt embedding a redacted step output, a bracketed tag): not JSON text.
      'The invoice on file is:\n{"customer_name":"[REDACTED:pii]","salary":"[REDACTED:hr]","amount":120}',
      '[System] Reply with "customer_name" and "salary" only',
      '{{customer_name}} earns "salary" 95000',
      '[2024-05-01 12:00:01] INFO renamed column "salary" to "pay"\n[2024-05-01 12:00:02] INFO done',
      // A title line that is JSON on its own (a year, a quoted title) above prose quoting a name.
      '2024\nThe "salary" column was renamed to "pay".\nSee the changelog.',
      '"Release notes"\nRenamed "salary" to "pay".\nThanks.',
    ];
    for (const text of texts) {
      const r = redactValue({ body: text }, policy);
      expect(r.value).toEqual({ body: text });
      expect(r.redactions).toEqual([]);
      expect(redactText(text, policy, '/prompt').value).toBe(text);
    }
    // Granted classes: nothing is classified, nothing is parsed.
    const granted = redactValue({ body: '\uFEFF{"salary":95000,"salary":1' }, { grants: ['hr', 'pii'], fieldClasses: classes });
    expect(granted.value).toEqual({ body: '\uFEFF{"salary":95000,"salary":1' });
  });

  it('past the depth bound, JSON text naming a classified field is withheld unread', () => {
    let v: unknown = { body: '{"salary":95000}', other: '{"city":"Oslo"}' };
    for (let i = 0; i < 200; i++) v = { a: v };
    const path = `${'/a'.repeat(200)}/body`;
    const r = redactValue(v, policy);
    let inner = r.value as Record<string, unknown>;
    for (let i = 0; i < 200; i++) inner = inner.a as Record<string, unknown>;
    expect(inner).toEqual({ body: '[REDACTED:hr]', other: '{"city":"Oslo"}' });
    expect(r.redactions).toEqual([{ class: 'hr', path, count: 1 }]);
  });

  it('a ~5 MB body with one integer past 2^53 is read in about the time of one without (10,000 names noted on the way)', () => {
    // Matched as text it was quick and leaked; read, it is walked like the body without the big
    // integer. Each took minutes before the noted literals were found in one pass (every string
    // was scanned once per literal, so 10,000 names made the walk quadratic); now about a
    // second each. The bound is far from both.
    const note = 'lorem ipsum dolor sit amet '.repeat(17);
    const rows = Array.from({ length: 10_000 }, (_, i) => `{"id":${i},"customer_name":"Customer ${i}","salary":${50_000 + i},"note":"${note}"}`);
    const plain = `{"rows":[${rows.join(',')}],"cursor":1}`;
    const big = `{"rows":[${rows.join(',')}],"cursor":1466000000000000001}`;
    expect(big.length).toBeGreaterThan(5_000_000);
    const time = (raw: string) => {
      const t0 = performance.now();
      const r = redactValue({ body: raw, note: 'Customer 9999 called' }, policy);
      return { ms: performance.now() - t0, value: r.value as { body: string; note: string } };
    };
    const a = time(plain);
    const b = time(big);
    expect(b.value.body.endsWith('],"cursor":"1466000000000000001"}')).toBe(true);
    expect(b.value.body).not.toMatch(/"salary":\d|Customer \d/);
    expect(b.value.note).toBe('[REDACTED:pii] called');
    expect(b.value.body).toBe(a.value.body.replace('"cursor":1}', '"cursor":"1466000000000000001"}'));
    expect(b.ms).toBeLessThan(Math.max(20 * a.ms, 15_000));
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

  it('known literals are found in one pass as repeated indexOf finds them, however many there are', () => {
    const naive = (literals: Map<string, number>, text: string) => {
      const out: Array<[number, number, number]> = [];
      for (const [v, tag] of literals) for (let at = text.indexOf(v); at >= 0; at = text.indexOf(v, at + v.length)) out.push([at, at + v.length, tag]);
      return out.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
    };
    const piece = fc.stringMatching(/^[ab01]{1,6}$/);
    fc.assert(
      fc.property(fc.uniqueArray(piece, { minLength: 0, maxLength: 40 }), fc.array(piece, { maxLength: 30 }), (literals, parts) => {
        const set = new LiteralSet<number>();
        const map = new Map<string, number>();
        literals.forEach((l, i) => {
          set.add(l, i);
          map.set(l, i);
        });
        const text = parts.join('');
        expect(set.findIn(text).sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2])).toEqual(naive(map, text));
      }),
      { numRuns: 300 },
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

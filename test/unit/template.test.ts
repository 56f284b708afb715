/**
 * Step templates (decisions 4): a string that is one template yields the raw value, an
 * embedded one its JSON text; a path the run lacks is a TemplateError.
 */
import { describe, expect, it, vi } from 'vitest';
import { SvcError } from '../../src/errors.js';
import { isWholeTemplate, renderTemplates, templateRefs, TemplateError } from '../../src/bundle/templates.js';

const ctx = {
  input: { invoice_id: 'inv_1', amount: 42.5, tags: ['a', 'b'], nested: { ok: true }, nothing: null },
  steps: { triage: { output: { amount: 180, reason: 'twice', lines: [{ sku: 'A1' }] } }, refund: { output: { id: 'ref_9' } } },
};

describe('renderTemplates (D 4)', () => {
  it('a string that is one template yields the raw value', () => {
    expect(renderTemplates('{{input.amount}}', ctx)).toBe(42.5);
    expect(renderTemplates('{{ input.nested }}', ctx)).toEqual({ ok: true });
    expect(renderTemplates('{{input.tags}}', ctx)).toEqual(['a', 'b']);
    expect(renderTemplates('{{input.nothing}}', ctx)).toBeNull();
    expect(renderTemplates('{{steps.triage.output.amount}}', ctx)).toBe(180);
    expect(renderTemplates('{{input.invoice_id}}', ctx)).toBe('inv_1');
  });

  it('an embedded template becomes the JSON text of its value', () => {
    expect(renderTemplates('refund {{steps.triage.output.amount}} now', ctx)).toBe('refund 180 now');
    expect(renderTemplates('invoice {{input.invoice_id}}', ctx)).toBe('invoice "inv_1"');
    expect(renderTemplates('{{input.nested}}!', ctx)).toBe('{"ok":true}!');
    expect(renderTemplates('{{input.amount}}{{input.tags}}', ctx)).toBe('42.5["a","b"]');
  });

  it('renders inside objects and lists, leaving other values and keys alone', () => {
    const args = { invoice_id: '{{input.invoice_id}}', lines: ['{{steps.triage.output.lines.0.sku}}', 3, true, null], '{{k}}': 'plain' };
    expect(renderTemplates(args, ctx)).toEqual({ invoice_id: 'inv_1', lines: ['A1', 3, true, null], '{{k}}': 'plain' });
    expect(args.invoice_id).toBe('{{input.invoice_id}}'); // pure: the input is untouched
  });

  it('keeps a "__proto__" key as data', () => {
    const out = renderTemplates(JSON.parse('{"__proto__": {"x": "{{input.invoice_id}}"}}'), ctx) as Record<string, unknown>;
    expect(Object.prototype.hasOwnProperty.call(out, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
  });

  it('an unknown path throws TemplateError (template_invalid) naming it', () => {
    const cases: Array<[string, RegExp]> = [
      ['{{input.missing}}', /input has no member "missing"/],
      ['{{steps.later.output.id}}', /no earlier step "later" has output/],
      ['{{steps.triage.output.lines.5.sku}}', /has no element 5/],
      ['x {{input.invoice_id.length}}', /input\.invoice_id has no member "length"/],
      ['{{input.nested.ok.deeper}}', /has no member "deeper"/],
    ];
    for (const [tpl, msg] of cases) {
      let caught: unknown;
      try {
        renderTemplates({ a: tpl }, ctx);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(TemplateError);
      expect(caught).toBeInstanceOf(SvcError);
      expect((caught as SvcError).code).toBe('template_invalid');
      expect((caught as SvcError).status).toBe(422);
      expect((caught as Error).message).toMatch(msg);
      expect((caught as SvcError).details.template).toBe(tpl.slice(tpl.indexOf('{{')));
    }
  });

  it('a malformed template throws too', () => {
    expect(() => renderTemplates('{{input.a', ctx)).toThrow(/unclosed/);
    expect(() => renderTemplates('{{ run.id }}', ctx)).toThrow(/"input\.…" or "steps/);
    expect(() => renderTemplates('{{steps.triage.amount}}', ctx)).toThrow(/steps\.<id>\.output/);
    expect(() => renderTemplates('{{}}', ctx)).toThrow(/empty template/);
  });
});

describe('{{path | text}}: a value inserted without JSON quotes (svc-bundle(5) TEMPLATES; svc\'s addition to D 4)', () => {
  it('inserts a string as it is and a number or bool as its text, embedded or whole', () => {
    expect(renderTemplates('reports/{{input.invoice_id | text}}.json', ctx)).toBe('reports/inv_1.json');
    expect(renderTemplates('/invoices/{{input.invoice_id|text}}/lines/{{ steps.triage.output.lines.0.sku | text }}', ctx)).toBe('/invoices/inv_1/lines/A1');
    expect(renderTemplates('amount={{input.amount | text}} ok={{input.nested.ok | text}}', ctx)).toBe('amount=42.5 ok=true');
    // The whole-string form is text too: the number 180 becomes the string "180".
    expect(renderTemplates('{{steps.triage.output.amount | text}}', ctx)).toBe('180');
    expect(renderTemplates('{{input.invoice_id | text}}', ctx)).toBe('inv_1');
    // Without the filter, nothing changes (D 4).
    expect(renderTemplates('reports/{{input.invoice_id}}.json', ctx)).toBe('reports/"inv_1".json');
  });

  it('a list, an object or null has no one plain text: template_invalid naming the path and what it is', () => {
    for (const [template, kind] of [
      ['{{input.tags | text}}', 'a list'],
      ['x {{input.nested | text}}', 'an object'],
      ['{{input.nothing | text}}', 'null'],
    ] as const) {
      const err = (() => {
        try {
          renderTemplates(template, ctx);
        } catch (e) {
          return e as TemplateError;
        }
        throw new Error(`${template} rendered`);
      })();
      expect(err).toBeInstanceOf(TemplateError);
      expect(err.code).toBe('template_invalid');
      expect(err.message).toContain(`"| text" needs a string, number or bool, and input.`);
      expect(err.message).toContain(`is ${kind}`);
    }
  });

  it('an unknown filter, or a filter without a path, is malformed; templateRefs gives the path and the filter', () => {
    expect(() => renderTemplates('{{input.invoice_id | upper}}', ctx)).toThrow(/unknown filter "upper" after "\|": the one filter is "text"/);
    expect(() => renderTemplates('{{input.invoice_id | text | text}}', ctx)).toThrow(/unknown filter "text \| text"/);
    expect(() => renderTemplates('{{ | text}}', ctx)).toThrow(/empty template/);
    expect(templateRefs({ path: 'a/{{input.id | text}}', n: '{{input.n}}' })).toEqual([
      { pointer: '/path', template: '{{input.id | text}}', path: ['input', 'id'], filter: 'text', embedded: true },
      { pointer: '/n', template: '{{input.n}}', path: ['input', 'n'] },
    ]);
  });
});

describe('templateRefs (D 4)', () => {
  it('lists every template with the JSON pointer of its string', () => {
    const refs = templateRefs({ a: 'x {{input.a}} {{steps.s.output}}', 'b/c': ['{{input.b}}'], n: 1 }, '/args');
    expect(refs).toEqual([
      { pointer: '/args/a', template: '{{input.a}}', path: ['input', 'a'], embedded: true },
      { pointer: '/args/a', template: '{{steps.s.output}}', path: ['steps', 's', 'output'], embedded: true },
      { pointer: '/args/b~1c/0', template: '{{input.b}}', path: ['input', 'b'] },
    ]);
  });

  it('marks malformed templates with an error', () => {
    const [ref] = templateRefs('{{ bad path }}');
    expect(ref!.path).toBeNull();
    expect(ref!.error).toMatch(/not a path/);
  });
});

// A stall sweep: "is this string one template" was a regexp whose `\s*` around a lazy group
// backtracked in cubic time over spaces no `}}` ends (2,000 of them took 1.5 s).
describe('one template and nothing else', () => {
  const OLD = /^\{\{\s*([^{}]*?)\s*\}\}$/;
  it('is what the regexp said, on every string of up to 7 of "{", "}", " ", "a"', () => {
    const strings: string[] = [''];
    for (let len = 1, from = 0; len <= 7; len++) {
      const to = strings.length;
      for (let k = from; k < to; k++) for (const c of ['{', '}', ' ', 'a']) strings.push(strings[k] + c);
      from = to;
    }
    for (const s of strings) expect([s, isWholeTemplate(s)]).toEqual([s, OLD.test(s)]);
  });

  it('no regular expression runs over a long string while its templates are found and rendered', () => {
    const spaces = ' '.repeat(100_000);
    const texts = [`{{${spaces}}}x`, `{{ input.a${spaces}}}x`, `{{${spaces}input.a}}`];
    // Long strings are recorded and not matched: the old regexp would not have ended.
    const { test: realTest, exec: realExec } = RegExp.prototype;
    const test = vi.spyOn(RegExp.prototype, 'test').mockImplementation(function (this: RegExp, s: string) {
      return s.length > 1000 ? false : realTest.call(this, s);
    });
    const exec = vi.spyOn(RegExp.prototype, 'exec').mockImplementation(function (this: RegExp, s: string) {
      return s.length > 1000 ? null : realExec.call(this, s);
    });
    try {
      templateRefs({ a: texts[0], b: texts[1], c: texts[2] });
      try {
        renderTemplates({ a: texts[1] }, { input: { a: 1 }, steps: {} });
      } catch {
        // "{{ input.a<spaces>}}x" is an embedded template: rendered or refused, either is fine here.
      }
      const long = [...test.mock.calls, ...exec.mock.calls].filter(([arg]) => typeof arg === 'string' && arg.length > 1000).map(([arg]) => String(arg).slice(0, 16));
      expect(long).toEqual([]);
    } finally {
      test.mockRestore();
      exec.mockRestore();
    }
  });
});


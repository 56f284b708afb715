/**
 * Step templates (decisions 4): a string that is one template yields the raw value, an
 * embedded one its JSON text; a path the run lacks is a TemplateError.
 */
import { describe, expect, it } from 'vitest';
import { SvcError } from '../../src/errors.js';
import { renderTemplates, templateRefs, TemplateError } from '../../src/bundle/templates.js';

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

describe('templateRefs (D 4)', () => {
  it('lists every template with the JSON pointer of its string', () => {
    const refs = templateRefs({ a: 'x {{input.a}} {{steps.s.output}}', 'b/c': ['{{input.b}}'], n: 1 }, '/args');
    expect(refs).toEqual([
      { pointer: '/args/a', template: '{{input.a}}', path: ['input', 'a'] },
      { pointer: '/args/a', template: '{{steps.s.output}}', path: ['steps', 's', 'output'] },
      { pointer: '/args/b~1c/0', template: '{{input.b}}', path: ['input', 'b'] },
    ]);
  });

  it('marks malformed templates with an error', () => {
    const [ref] = templateRefs('{{ bad path }}');
    expect(ref!.path).toBeNull();
    expect(ref!.error).toMatch(/not a path/);
  });
});

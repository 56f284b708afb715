/**
 * What a template_invalid says when a path misses (svc-bundle(5) TEMPLATES, compensate): the
 * members the value it stopped at does have, so an author who guessed the output's shape
 * wrong (a sqlite write's one RETURNING row is the output itself, not {rows}: svc-gateway(5))
 * sees the path to write instead. Member names only, and only plain ones: never a value, nor
 * a key that may be data (an email used as a key).
 */
import { describe, expect, it } from 'vitest';
import { renderTemplates, TemplateError } from '../../src/bundle/templates.js';

const ctx = {
  input: { order_id: 'O-1', note: 'x', none: null },
  steps: {
    reserve: { output: { id: 1, order_id: 'O-1', sku: 'SKU-A', qty: 2, status: 'held' } },
    lookup: { output: { rows: [{ id: 'O-1' }] } },
    byEmail: { output: { 'ann@example.com': { n: 1 } } },
    empty: { output: {} },
    many: { output: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, i])) },
  },
};

function messageOf(template: string): string {
  try {
    renderTemplates({ a: template }, ctx);
  } catch (err) {
    expect(err).toBeInstanceOf(TemplateError);
    return (err as Error).message;
  }
  throw new Error('expected template_invalid');
}

describe('template_invalid names what the value has (svc-bundle(5) TEMPLATES)', () => {
  it('a missing member: the members there are', () => {
    expect(messageOf('{{steps.reserve.output.rows.0.id}}')).toBe(
      'template {{steps.reserve.output.rows.0.id}}: steps.reserve.output has no member "rows" (its members: id, order_id, sku, qty, status)',
    );
    expect(messageOf('{{input.order}}')).toBe('template {{input.order}}: input has no member "order" (its members: order_id, note, none)');
  });

  it('a value that is not an object: its type', () => {
    expect(messageOf('{{input.order_id.value}}')).toBe('template {{input.order_id.value}}: input.order_id has no member "value" (it is a string)');
    expect(messageOf('{{input.none.x}}')).toBe('template {{input.none.x}}: input.none has no member "x" (it is null)');
    expect(messageOf('{{steps.empty.output.id}}')).toBe('template {{steps.empty.output.id}}: steps.empty.output has no member "id" (it is an empty object)');
  });

  it('keys that may be data, or too many of them, are not listed', () => {
    expect(messageOf('{{steps.byEmail.output.id}}')).toBe('template {{steps.byEmail.output.id}}: steps.byEmail.output has no member "id"');
    expect(messageOf('{{steps.many.output.id}}')).toBe('template {{steps.many.output.id}}: steps.many.output has no member "id"');
  });
});

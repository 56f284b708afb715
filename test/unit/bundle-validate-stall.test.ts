/**
 * Bundle validation stays linear in the bundle (docs/design.md, Bundles and policies, "stall
 * sweep"): a prompt or mock script many steps share is scanned once, identical schemas compile
 * once, and the schemas' total size is bounded. Structural checks, no timings.
 */
import { describe, expect, it } from 'vitest';
import { MAX_BUNDLE_PROBLEMS, MAX_BUNDLE_SCHEMA_NODES, validateBundle } from '../../src/bundle/validate.js';

const base = { name: 'x', version: '1.0.0' };

/** An object that counts how often each member is read. */
function counting<T extends object>(target: T): { value: T; reads: Map<string, number> } {
  const reads = new Map<string, number>();
  const value = new Proxy(target, {
    get(t, key, receiver) {
      if (typeof key === 'string') reads.set(key, (reads.get(key) ?? 0) + 1);
      return Reflect.get(t, key, receiver);
    },
  });
  return { value, reads };
}

describe('bundle validation of shared sources', () => {
  it('reads a prompt that 500 steps use once, and still reports each step that reads a later step', () => {
    const steps = Array.from({ length: 500 }, (_, i) => ({ id: `s${i}`, kind: 'model', prompt: 'p' }));
    const { value: prompts, reads } = counting({ p: 'see {{input.a}} and {{steps.s3.output.x}}' });
    const r = validateBundle({ ...base, prompts, workflows: { w: { input_schema: { type: 'object' }, steps } } });
    expect(reads.get('p')).toBeLessThan(10); // the shape, the prompts' own check, then once for the steps (over 500 before)
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.path)).toEqual([0, 1, 2, 3].map((i) => `/workflows/w/steps/${i}/prompt`));
    expect(r.problems[0]!.message).toBe('prompt "p": template {{steps.s3.output.x}} reads step "s3", which does not run before this step');
  });

  it('walks a mock script that 200 workflows share once', () => {
    const workflows = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`w${i}`, { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'model', prompt: 'p' }] }]));
    const script = counting({ output: { text: '{{input.a}}' }, tool_calls: [] });
    const r = validateBundle({ ...base, prompts: { p: 'hi' }, mock: { a: script.value }, workflows });
    expect(script.reads.get('output')).toBeLessThan(10); // the shape, then once for the steps (over 200 before)
    expect(r.ok).toBe(true);
  });

  it(`stops after ${MAX_BUNDLE_PROBLEMS} problems`, () => {
    const steps = Array.from({ length: 800 }, (_, i) => ({ id: `s${i}`, kind: 'model', prompt: 'p' }));
    const r = validateBundle({ ...base, prompts: { p: '{{steps.nope.output}} {{steps.gone.output}}' }, workflows: { w: { input_schema: { type: 'object' }, steps } } });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const semantic = r.problems.filter((p) => p.message.includes('names no step'));
    expect(semantic).toHaveLength(MAX_BUNDLE_PROBLEMS);
  });
});

describe('bundle validation of JSON schemas', () => {
  it('compiles a schema that many steps repeat once, so repeats do not count toward the limit', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' }, b: { type: 'array', items: { type: 'integer' } } } };
    const steps = Array.from({ length: 1000 }, (_, i) => ({ id: `s${i}`, kind: 'tool', tool: 'a.b', output_schema: structuredClone(schema) }));
    expect(validateBundle({ ...base, workflows: { w: { input_schema: schema, steps } } })).toMatchObject({ ok: true });
  });

  it(`refuses schemas holding more than ${MAX_BUNDLE_SCHEMA_NODES} objects and arrays in all, at the schema that goes over`, () => {
    const properties = Object.fromEntries(Array.from({ length: MAX_BUNDLE_SCHEMA_NODES - 10 }, (_, i) => [`p${i}`, { type: 'string' }]));
    const steps = [
      { id: 'a', kind: 'tool', tool: 'a.b', output_schema: { type: 'object', properties: { x: { type: 'string' } } } },
      { id: 'b', kind: 'tool', tool: 'a.b', output_schema: { type: 'array', items: [{}, {}, {}, {}, {}, {}, {}, {}, {}, {}] } },
    ];
    const r = validateBundle({ ...base, workflows: { w: { input_schema: { type: 'object', properties }, steps } } });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems).toEqual([
      { path: '/workflows/w/steps/1/output_schema', message: `is not checked: the bundle's JSON schemas hold more than ${MAX_BUNDLE_SCHEMA_NODES} objects and arrays in all (identical schemas count once); compiling more would hold svcd's other requests for seconds` },
    ]);
  });
});

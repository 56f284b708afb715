/**
 * Bundle validation (decisions 4, interface 7.1 bundle_invalid): one JSON Schema for every
 * member, every problem listed with a JSON pointer, and the semantic checks (templates, step
 * ids, prompts, tool references, input schemas).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { inputTemplatesOutsideSchema, mockScriptNotes, modelStepsWithoutMock, quotedStringTemplates, undeclaredTools, validateBundle, type BundleProblem } from '../../src/bundle/validate.js';
import { ROOT } from '../helpers/daemon.js';

const refunds = () => parse(readFileSync(join(ROOT, 'fixtures/bundles/refunds.yaml'), 'utf8'));

function minimal(): any {
  return {
    name: 'mini',
    version: '0.1.0',
    tools: { 'svc.read': { writes: false }, 'svc.write': { writes: true }, 'svc.undo': { writes: true } },
    prompts: { ask: 'Q: {{input.q}}' },
    workflows: {
      main: {
        input_schema: { type: 'object' },
        steps: [
          { id: 'think', kind: 'model', prompt: 'ask', tools: ['svc.read'] },
          { id: 'do', kind: 'action', tool: 'svc.write', args: { x: '{{steps.think.output.x}}' }, compensate: { tool: 'svc.undo', args: { id: '{{steps.do.output.id}}' } } },
        ],
      },
    },
  };
}

function problemsOf(value: unknown): BundleProblem[] {
  const r = validateBundle(value);
  if (r.ok) throw new Error('expected problems');
  return r.problems;
}

describe('valid bundles (D 4)', () => {
  it('accepts the refunds fixture and a minimal bundle', () => {
    expect(validateBundle(refunds())).toMatchObject({ ok: true });
    expect(validateBundle(minimal())).toMatchObject({ ok: true });
  });

  it("accepts decisions 4's own sample bundle, verbatim (its undeclared tools are notes)", () => {
    const sample = parse(readFileSync(join(ROOT, 'fixtures/bundles/decisions-example.yaml'), 'utf8'));
    expect(validateBundle(sample)).toMatchObject({ ok: true });
    expect(undeclaredTools(sample).map((n) => n.path)).toEqual(['/workflows/refund/steps/0/tools/0', '/workflows/refund/steps/1/compensate/tool']);
  });

  it('accepts every optional member of decisions 4', () => {
    const b = minimal();
    Object.assign(b, {
      description: 'd',
      department: 'support',
      systems_of_record: ['svc'],
      mock: { think: { output: { x: 1 }, tool_calls: [{ tool: 'svc.read', args: {} }], actions: [{ tool: 'svc.write', args: {} }], usage: { tokens: 1, usd: 0.1 } } },
      pacing: { model: { max_concurrent: 2, min_interval_ms: 250 }, action: { max_concurrent: 1 } },
    });
    Object.assign(b.workflows.main, { department: 'ops', description: 'x' });
    Object.assign(b.workflows.main.steps[0], { output_schema: { type: 'object' }, retry: { max_attempts: 3, initial_delay_ms: 1000, max_delay_ms: 60000 }, timeout_seconds: 300 });
    expect(validateBundle(b)).toMatchObject({ ok: true });
  });

  it('checks an input schema in the dialect its $schema names (draft-07 by default)', () => {
    const b = minimal();
    // prefixItems is a 2020-12 keyword (at least one item); draft-07 ignores it.
    b.workflows.main.input_schema = { type: 'array', prefixItems: [] };
    expect(validateBundle(b)).toMatchObject({ ok: true });
    b.workflows.main.input_schema = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'array', prefixItems: [{ type: 'string' }] };
    expect(validateBundle(b)).toMatchObject({ ok: true });
    b.workflows.main.input_schema.prefixItems = [];
    expect(problemsOf(b)).toEqual([{ path: '/workflows/main/input_schema/prefixItems', message: expect.stringMatching(/^is not a valid JSON schema/) }]);
  });

  it('patterns are RE2 (linear time, src/util/linear-regexp.ts): a backreference or lookahead is refused at the pattern itself', () => {
    const b = minimal();
    b.workflows.main.input_schema = { type: 'object', properties: { slug: { type: 'string', pattern: '^([a-z]+)+$' }, code: { type: 'string', pattern: '^\\p{Lu}{2}-\\d+$' } } };
    expect(validateBundle(b)).toMatchObject({ ok: true });
    b.workflows.main.input_schema.properties.slug.pattern = '^(a)\\1$';
    expect(problemsOf(b)).toEqual([{ path: '/workflows/main/input_schema/properties/slug/pattern', message: expect.stringMatching(/^is not a pattern svc can run in linear time \(invalid escape sequence.*backreferences and lookaround are not available$/) }]);
    b.workflows.main.input_schema.properties.slug.pattern = '^(?=a)a$';
    expect(problemsOf(b)[0]).toMatchObject({ path: '/workflows/main/input_schema/properties/slug/pattern', message: expect.stringMatching(/^is not a pattern svc can run in linear time/) });
    // A patternProperties name is a pattern too, named by its own pointer token.
    b.workflows.main.input_schema = { type: 'object', patternProperties: { '^x/(?!y)': { type: 'string' } } };
    expect(problemsOf(b)[0]!.path).toBe('/workflows/main/input_schema/patternProperties/^x~1(?!y)');
  });
});

describe('schema problems, every one with its path (D 4)', () => {
  it('lists them all at once', () => {
    const b = minimal();
    b.name = 'Mini!';
    b.version = '1.0';
    b.colour = 'blue';
    b.tools.NotATool = {};
    b.pacing = { model: { max_concurrent: 0 }, turbo: {} };
    b.systems_of_record = 'billing';
    b.workflows.main.steps.push({ id: 'bad id', kind: 'teleport' });
    b.workflows.main.steps[1].retry = { max_attempts: 'three' };
    b.workflows.other = { steps: [] };
    const problems = problemsOf(b);
    const expected: BundleProblem[] = [
      { path: '/colour', message: 'is not a member of this object' },
      { path: '/name', message: expect.stringMatching(/a-z/) },
      { path: '/version', message: 'must be a semantic version such as 1.2.0' },
      { path: '/systems_of_record', message: 'must be an array' },
      { path: '/tools/NotATool', message: 'must be a tool id <connector>.<operation>' },
      { path: '/pacing/turbo', message: 'is not a member of this object' },
      { path: '/pacing/model/max_concurrent', message: 'must be >= 1' },
      { path: '/workflows/main/steps/1/retry/max_attempts', message: 'must be an integer' },
      { path: '/workflows/main/steps/2/id', message: expect.stringMatching(/letters, digits/) },
      { path: '/workflows/main/steps/2/kind', message: 'must be model, tool or action' },
      { path: '/workflows/other/input_schema', message: 'is required' },
      { path: '/workflows/other/steps', message: 'must list at least one step' },
    ];
    for (const e of expected) expect(problems).toContainEqual(e);
    expect(problems).toHaveLength(expected.length);
  });

  it('a tools entry that is not an object says what it holds (svc-bundle(5) tools)', () => {
    const b = minimal();
    b.tools['svc.read'] = 'reads the ledger';
    b.tools['svc.write'] = { writes: 'yes' };
    expect(problemsOf(b)).toEqual([
      { path: '/tools/svc.read', message: 'must be an object: {writes, description}, as in {writes: true, description: "issue a refund"}' },
      { path: '/tools/svc.write/writes', message: 'must be true or false' },
    ]);
  });

  it('requires name, version and workflows', () => {
    expect(problemsOf({})).toEqual([
      { path: '/name', message: 'is required' },
      { path: '/version', message: 'is required' },
      { path: '/workflows', message: 'is required' },
    ]);
  });

  it('a non-object is one problem at the root, saying what a bundle is and what the file holds (I 7.1 bundle_invalid)', () => {
    expect(problemsOf([1])).toEqual([{ path: '', message: 'must be an object with name, version and workflows, not a list' }]);
    // An empty YAML file parses to null; /etc/passwd to one string.
    expect(problemsOf(null)).toEqual([{ path: '', message: 'must be an object with name, version and workflows, not null (an empty file?)' }]);
    expect(problemsOf('root:x:0:0')).toEqual([{ path: '', message: 'must be an object with name, version and workflows, not a single string' }]);
  });

  it('a number where a string belongs says YAML read it as one, and what the string must be (D 4)', () => {
    const b = minimal();
    b.version = 1.2; // `version: 1.2` in YAML
    b.department = 7;
    expect(problemsOf(b)).toEqual([
      { path: '/version', message: 'must be a semantic version such as 1.2.0, in quotes (YAML reads an unquoted 1.2 as a number)' },
      { path: '/department', message: 'must be 1-64 letters, digits, ".", "_" or "-", in quotes (YAML reads an unquoted 7 as a number)' },
    ]);
    // A number where an integer belongs is not a YAML quoting matter.
    b.version = '0.1.0';
    delete b.department;
    b.workflows.main.steps[0].timeout_seconds = 'soon';
    expect(problemsOf(b)).toEqual([{ path: '/workflows/main/steps/0/timeout_seconds', message: 'must be an integer' }]);
  });

  it('checks the members each step kind may have', () => {
    const b = minimal();
    b.workflows.main.steps[0].tool = 'svc.read';
    b.workflows.main.steps[0].args = {};
    delete b.workflows.main.steps[0].prompt;
    b.workflows.main.steps[1].prompt = 'ask';
    b.workflows.main.steps[1].tools = ['svc.read'];
    delete b.workflows.main.steps[1].tool;
    const problems = problemsOf(b);
    expect(problems).toEqual(
      expect.arrayContaining([
        { path: '/workflows/main/steps/0/prompt', message: 'is required' },
        { path: '/workflows/main/steps/0/tool', message: expect.stringMatching(/tool and action steps/) },
        { path: '/workflows/main/steps/0/args', message: 'is for tool and action steps' },
        { path: '/workflows/main/steps/1/tool', message: 'is required' },
        { path: '/workflows/main/steps/1/prompt', message: 'is for model steps' },
        { path: '/workflows/main/steps/1/tools', message: expect.stringMatching(/model steps/) },
      ]),
    );
  });

  it('escapes JSON pointer segments', () => {
    const b = minimal();
    b.workflows['a/b~c'] = b.workflows.main;
    delete b.workflows.main;
    expect(problemsOf(b)).toContainEqual({ path: '/workflows/a~1b~0c', message: expect.stringMatching(/workflow name/) });
  });
});

describe('semantic problems (D 4)', () => {
  it('"__proto__" as a step id, a workflow or a prompt name is reserved: as an object key it would set the prototype', () => {
    const b = minimal();
    b.workflows.main.steps[0].id = '__proto__';
    expect(problemsOf(b)).toContainEqual({ path: '/workflows/main/steps/0/id', message: expect.stringMatching(/^"__proto__" is reserved/) });
    const w = JSON.parse(`{"__proto__": ${JSON.stringify(minimal().workflows.main)}}`);
    const c = { ...minimal(), workflows: w };
    expect(problemsOf(c)).toContainEqual({ path: '/workflows/__proto__', message: expect.stringMatching(/^"__proto__" is reserved/) });
    const p = { ...minimal(), prompts: JSON.parse('{"__proto__": "hi"}') };
    expect(problemsOf(p)).toContainEqual({ path: '/prompts/__proto__', message: expect.stringMatching(/^"__proto__" is reserved/) });
    // Other names of Object.prototype's members are plain keys: allowed.
    const d = minimal();
    d.workflows.main.steps[0].id = 'constructor';
    expect(problemsOf(d).filter((x) => /reserved/.test(x.message))).toEqual([]);
  });

  it('an input schema whose $ref cycle no value ends is refused at the schema: it would overflow on every run', () => {
    for (const cycle of [
      { $ref: '#' },
      { if: { type: 'object' }, then: { $ref: '#' } },
      { type: 'array', items: { $ref: '#' }, anyOf: [{ $ref: '#' }] },
      { type: 'object', properties: { q: { if: { minLength: 2 }, then: { $ref: '#/properties/q' } } } }, // no probe value reaches it
    ]) {
      const b = minimal();
      b.workflows.main.input_schema = cycle;
      expect(problemsOf(b), JSON.stringify(cycle)).toContainEqual({ path: expect.stringMatching(/^\/workflows\/main\/input_schema/), message: expect.stringMatching(/refers to itself without end/) });
    }
    const ok = minimal();
    ok.workflows.main.input_schema = { type: 'object', properties: { child: { $ref: '#' } } };
    expect(validateBundle(ok).ok).toBe(true); // a cycle through data ends with the data
  });

  it('duplicate step ids', () => {
    const b = minimal();
    b.workflows.main.steps.push({ id: 'think', kind: 'tool', tool: 'svc.read' });
    expect(problemsOf(b)).toEqual([{ path: '/workflows/main/steps/2/id', message: 'duplicate step id "think" (also step 0)' }]);
  });

  it('a template naming no step, a later step, or itself outside compensate', () => {
    const b = minimal();
    b.workflows.main.steps[1].args = { a: '{{steps.ghost.output.x}}', b: 'n={{steps.do.output.n}}', c: '{{steps.think.output.ok}}' };
    b.workflows.main.steps.splice(1, 0, { id: 'early', kind: 'tool', tool: 'svc.read', args: { y: '{{steps.do.output.y}}' } });
    expect(problemsOf(b)).toEqual([
      { path: '/workflows/main/steps/1/args/y', message: 'template {{steps.do.output.y}} reads step "do", which does not run before this step' },
      { path: '/workflows/main/steps/2/args/a', message: 'template {{steps.ghost.output.x}} names no step of workflow "main"' },
      { path: '/workflows/main/steps/2/args/b', message: 'template {{steps.do.output.n}} reads step "do", which does not run before this step' },
    ]);
  });

  it('a compensation may read its own step; templates in it are checked too', () => {
    const b = minimal();
    b.workflows.main.steps[1].compensate.args = { id: '{{steps.do.output.id}}', bad: '{{steps.nope.output}}', worse: '{{ input. }}' };
    expect(problemsOf(b)).toEqual([
      { path: '/workflows/main/steps/1/compensate/args/bad', message: 'template {{steps.nope.output}} names no step of workflow "main"' },
      { path: '/workflows/main/steps/1/compensate/args/worse', message: expect.stringMatching(/^template \{\{ input\. \}\}: .*not a path/) },
    ]);
  });

  it('malformed templates in args and prompts', () => {
    const b = minimal();
    b.workflows.main.steps[1].args = { a: '{{input.x', b: '{{ run.id }}' };
    b.prompts.ask = 'Q: {{input..q}}';
    expect(problemsOf(b)).toEqual([
      { path: '/prompts/ask', message: expect.stringMatching(/^template \{\{input\.\.q\}\}: /) },
      { path: '/workflows/main/steps/1/args/a', message: 'template {{input.x: unclosed template: "{{" without "}}"' },
      { path: '/workflows/main/steps/1/args/b', message: 'template {{ run.id }}: a template reads "input.…" or "steps.<id>.output.…", not "run"' },
    ]);
  });

  it('a prompt read by a step that runs before the step it names', () => {
    const b = minimal();
    b.prompts.ask = 'Use {{steps.do.output}}';
    expect(problemsOf(b)).toEqual([
      { path: '/workflows/main/steps/0/prompt', message: 'prompt "ask": template {{steps.do.output}} reads step "do", which does not run before this step' },
    ]);
  });

  it('an unknown prompt', () => {
    const b = minimal();
    b.workflows.main.steps[0].prompt = 'nope';
    expect(problemsOf(b)).toEqual([{ path: '/workflows/main/steps/0/prompt', message: 'unknown prompt "nope" (prompts: ask)' }]);
  });

  it('an unknown prompt in a bundle with no prompts says so', () => {
    const b = minimal();
    delete b.prompts;
    b.workflows.main.steps[0].prompt = 'ask';
    expect(problemsOf(b)).toEqual([{ path: '/workflows/main/steps/0/prompt', message: 'unknown prompt "ask" (the bundle has no prompts)' }]);
  });

  it('a template inside a longer string of args reading a string member is a note pointing at "| text" (svc-bundle(5) TEMPLATES)', () => {
    const b = minimal();
    b.workflows.main.input_schema = { type: 'object', properties: { id: { type: 'string' }, n: { type: 'integer' }, any: {} } };
    b.workflows.main.steps[0].output_schema = { type: 'object', properties: { file: { type: ['string'] } } };
    b.workflows.main.steps[1].args = {
      path: 'reports/{{input.id}}.json', // a string: quoted
      bare: 'reports/{{input.id | text}}.json', // already bare
      whole: '{{input.id}}', // the raw value, no quotes
      count: 'n={{input.n}}', // a number has no quotes
      unknown: 'a {{input.any}} b', // the schema does not say
      out: 'f-{{steps.think.output.file}}',
    };
    b.workflows.main.steps[1].compensate.args = { note: 'undo {{input.id}}' };
    expect(quotedStringTemplates(b)).toEqual([
      { path: '/workflows/main/steps/1/args/path', message: '{{input.id}} inside a longer string inserts the JSON text of input.id, a string, quotes included; write {{input.id | text}} for the bare text' },
      { path: '/workflows/main/steps/1/args/out', message: '{{steps.think.output.file}} inside a longer string inserts the JSON text of steps.think.output.file, a string, quotes included; write {{steps.think.output.file | text}} for the bare text' },
      { path: '/workflows/main/steps/1/compensate/args/note', message: '{{input.id}} inside a longer string inserts the JSON text of input.id, a string, quotes included; write {{input.id | text}} for the bare text' },
    ]);
    expect(validateBundle(b)).toMatchObject({ ok: true });
  });

  it('an {{input.…}} template a nested input_schema object forbids is a note at any depth; patternProperties, arrays and step outputs are not judged (svc-bundle(5) VALIDATION)', () => {
    const b = minimal();
    b.prompts.ask = 'Hi {{input.customer.name}}, not {{input.customer.nmae}}';
    b.workflows.main.input_schema = {
      type: 'object',
      additionalProperties: false,
      properties: {
        customer: { type: 'object', additionalProperties: false, properties: { name: { type: 'string' }, tags: { type: 'object', additionalProperties: false, patternProperties: { '^t': {} } } } },
        items: { type: 'array' },
      },
    };
    b.workflows.main.steps[1].args = { e: '{{input.customer.emial}}', t: '{{input.customer.tags.zz}}', i: '{{input.items.0.sku}}', x: '{{steps.think.output.x}}' };
    const why = 'which workflow "main"\'s input_schema does not allow (its members: name, tags); every run would fail with template_invalid';
    expect(inputTemplatesOutsideSchema(b)).toEqual([
      { path: '/prompts/ask', message: `{{input.customer.nmae}} names input.customer.nmae, ${why}` },
      { path: '/workflows/main/steps/1/args/e', message: `{{input.customer.emial}} names input.customer.emial, ${why}` },
    ]);
    // Notes, never problems: the bundle is valid.
    expect(validateBundle(b)).toMatchObject({ ok: true });
  });

  it('a tool named but not declared in tools is a note, not a problem', () => {
    const b = minimal();
    b.workflows.main.steps[0].tools = ['svc.read', 'crm.search'];
    b.workflows.main.steps[1].tool = 'crm.write';
    b.workflows.main.steps[1].compensate.tool = 'crm.undo';
    b.mock = { think: { tool_calls: [{ tool: 'crm.peek' }], actions: [{ tool: 'crm.act' }] } };
    expect(validateBundle(b).ok).toBe(true);
    expect(undeclaredTools(b)).toEqual([
      { path: '/workflows/main/steps/0/tools/1', message: 'tool "crm.search" is not declared in the bundle\'s tools' },
      { path: '/workflows/main/steps/1/tool', message: 'tool "crm.write" is not declared in the bundle\'s tools' },
      { path: '/workflows/main/steps/1/compensate/tool', message: 'tool "crm.undo" is not declared in the bundle\'s tools' },
      { path: '/mock/think/tool_calls/0/tool', message: 'tool "crm.peek" is not declared in the bundle\'s tools' },
      { path: '/mock/think/actions/0/tool', message: 'tool "crm.act" is not declared in the bundle\'s tools' },
    ]);
    expect(undeclaredTools(minimal())).toEqual([]);
  });

  it('notes a model step the mock has no script for (the mock provider would fail it with mock_script_missing)', () => {
    const b = minimal();
    expect(validateBundle(b).ok).toBe(true);
    expect(modelStepsWithoutMock(b)).toEqual([
      { path: '/workflows/main/steps/0', message: 'model step "think" has no mock script: under the mock provider (svc worker\'s default) it fails with mock_script_missing' },
    ]);
    b.mock = { think: { output: { x: 1 } } };
    expect(modelStepsWithoutMock(b)).toEqual([]);
  });

  it('an {{input.…}} typo in a model step\'s mock script is a note too: the worker renders the script with the run\'s input (svc-bundle(5) VALIDATION)', () => {
    const b = minimal();
    b.workflows.main.input_schema = { type: 'object', additionalProperties: false, properties: { q: { type: 'string' } } };
    b.mock = { think: { output: { x: '{{input.qq}}', y: '{{input.q}}' } } };
    expect(inputTemplatesOutsideSchema(b)).toEqual([
      { path: '/mock/think/output/x', message: '{{input.qq}} names input.qq, which workflow "main"\'s input_schema does not allow (its members: q); every run would fail with template_invalid' },
    ]);
    expect(validateBundle(b)).toMatchObject({ ok: true });
  });

  describe('mock scripts that would not play as meant are notes (svc-bundle(5) VALIDATION, mock)', () => {
    it('a script for a step that is a tool or action step everywhere is never played', () => {
      const b = minimal();
      b.mock = { think: { output: { x: 1 } }, do: { output: { id: 1 } } };
      expect(validateBundle(b).ok).toBe(true);
      expect(mockScriptNotes(b)).toEqual([
        { path: '/mock/do', message: 'step "do" is a action step: the mock provider answers model steps only (a tool or action step calls the gateway), so this script is never played' },
      ]);
      // The same id a model step in another workflow: the script plays there.
      b.workflows.other = { input_schema: { type: 'object' }, steps: [{ id: 'do', kind: 'model', prompt: 'ask' }] };
      expect(mockScriptNotes(b)).toEqual([]);
    });

    it('a scripted tool call of a tool the step does not offer is answered tool_not_offered; scripted actions are proposals and are not judged', () => {
      const b = minimal();
      b.mock = { think: { tool_calls: [{ tool: 'svc.read' }, { tool: 'svc.other', args: {} }], actions: [{ tool: 'svc.write' }], output: { x: 1 } } };
      expect(mockScriptNotes(b)).toEqual([
        {
          path: '/mock/think/tool_calls/1/tool',
          message: 'tool "svc.other" is not among the tools step "think" of workflow "main" offers (its tools: svc.read): the worker answers this call with tool_not_offered, as it would a real model\'s; add the tool to the step\'s tools',
        },
      ]);
    });

    it('a scripted output the step\'s output_schema refuses would fail every run with output_invalid; a templated member is not judged', () => {
      const b = minimal();
      b.workflows.main.steps[0].output_schema = { type: 'object', required: ['x'], additionalProperties: false, properties: { x: { type: 'integer' }, line: { type: 'string' } } };
      b.mock = { think: { output: { x: 1, n: 3 } } };
      const tail = 'under the mock provider every run would fail with output_invalid';
      expect(mockScriptNotes(b)).toEqual([{ path: '/mock/think/output', message: `this output does not match the output_schema of step "think" of workflow "main" (/n is not allowed): ${tail}` }]);
      // A templated value may render to anything: its type is not judged, a forbidden member still is.
      b.mock.think.output = { x: '{{input.n}}', line: 'n is {{input.n}}' };
      expect(mockScriptNotes(b)).toEqual([]);
      b.mock.think.output = { x: '{{input.n}}', extra: '{{input.n}}' };
      expect(mockScriptNotes(b)).toEqual([{ path: '/mock/think/output', message: expect.stringContaining('(/extra is not allowed)') }]);
      // No output at all: the step outputs null.
      b.mock.think = { text: 'done' };
      expect(mockScriptNotes(b)).toEqual([{ path: '/mock/think', message: `the script has no output (the step would output null), which does not match the output_schema of step "think" of workflow "main" (/ must be an object): ${tail}` }]);
      // A script that fails, or an output that fits, is no note.
      b.mock.think = { error: { code: 'rate_limited' } };
      expect(mockScriptNotes(b)).toEqual([]);
      b.mock.think = { output: { x: 2 } };
      expect(mockScriptNotes(b)).toEqual([]);
      expect(validateBundle(b).ok).toBe(true);
    });
  });

  it('input and output schemas must be valid JSON schemas', () => {
    const b = minimal();
    b.workflows.main.input_schema = { type: 'objekt' };
    b.workflows.main.steps[0].output_schema = { type: 'object', properties: { a: { minimum: 'zero' } } };
    expect(problemsOf(b)).toEqual([
      { path: '/workflows/main/input_schema/type', message: expect.stringMatching(/^is not a valid JSON schema/) },
      { path: '/workflows/main/steps/0/output_schema/properties/a/minimum', message: expect.stringMatching(/^is not a valid JSON schema/) },
    ]);
  });

  it('a schema that does not compile (bad $ref)', () => {
    const b = minimal();
    b.workflows.main.input_schema = { $ref: '#/definitions/nothing' };
    expect(problemsOf(b)).toEqual([{ path: '/workflows/main/input_schema', message: expect.stringMatching(/^is not a valid JSON schema: .*nothing/) }]);
  });

  it("a mock error fits what POST /v1/leases/{id}/fail accepts (code 1–128 characters)", () => {
    const b = minimal();
    b.mock = { think: { error: { code: 'provider_error', message: 'scripted', deterministic: false }, delay_ms: 10, text: 'hm' } };
    expect(validateBundle(b).ok).toBe(true);
    b.mock = { think: { error: { code: '' } } };
    expect(problemsOf(b).map((p) => p.path)).toEqual(['/mock/think/error/code']);
    b.mock = { think: { error: { code: 'x'.repeat(129) } } };
    expect(problemsOf(b).map((p) => p.path)).toEqual(['/mock/think/error/code']);
  });

  it('a mock script must name a step', () => {
    const b = minimal();
    b.mock = { ghost: { output: {} } };
    expect(problemsOf(b)).toEqual([{ path: '/mock/ghost', message: 'mock script names no step of any workflow ("ghost")' }]);
  });

  it("a mock script's templates are checked like the step's prompt (D 4: input.* or an earlier step's output)", () => {
    const b = minimal();
    b.workflows.main.steps.push({ id: 'think2', kind: 'model', prompt: 'ask' });
    b.mock = { think2: { tool_calls: [{ tool: 'svc.read', args: { q: '{{input.q}}', x: '{{steps.think.output.x}}' } }], output: { y: 'was {{steps.think.output}}' } } };
    expect(validateBundle(b).ok).toBe(true);
    b.mock = {
      think: {
        tool_calls: [{ tool: 'svc.read', args: { home: '{{env.HOME}}', open: '{{input.q', later: '{{steps.do.output}}', ghost: '{{steps.nope.output}}' } }],
        actions: [{ tool: 'svc.write', args: { self: '{{steps.think.output.x}}' } }],
      },
    };
    expect(problemsOf(b).map((p) => p.path).sort()).toEqual([
      '/mock/think/actions/0/args/self',
      '/mock/think/tool_calls/0/args/ghost',
      '/mock/think/tool_calls/0/args/home',
      '/mock/think/tool_calls/0/args/later',
      '/mock/think/tool_calls/0/args/open',
    ]);
  });

  it('a step id shared by two workflows: its mock script is checked in each, each problem reported once', () => {
    const b = minimal();
    b.workflows.other = { input_schema: { type: 'object' }, steps: [{ id: 'think', kind: 'model', prompt: 'ask' }] };
    b.mock = { think: { output: { z: '{{env.X}}' } } };
    expect(problemsOf(b).map((p) => p.path)).toEqual(['/mock/think/output/z']);
  });

  it('refuses nesting deeper than 64 levels before walking it', () => {
    const b = minimal();
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    b.workflows.main.steps[1].args = { deep };
    const [p] = problemsOf(b);
    expect(p!.message).toBe('is nested deeper than 64 levels');
    expect(p!.path).toMatch(/^\/workflows\/main\/steps\/1\/args\/deep(\/0)+$/);
  });

  it('semantic checks also run when the schema fails, so one pass lists everything', () => {
    const b = minimal();
    b.version = 'one';
    b.workflows.main.steps[0].prompt = 'nope';
    expect(problemsOf(b).map((p) => p.path)).toEqual(['/version', '/workflows/main/steps/0/prompt']);
  });
});

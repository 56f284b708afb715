/**
 * Bundle validation (decisions 4): the JSON Schema (every problem, not just the first), then
 * the checks a schema cannot express:
 *
 * - step ids are unique within a workflow;
 * - templates are well formed and `{{steps.<id>…}}` names an earlier step of the same
 *   workflow (a step's `compensate` may also read its own output); prompts are checked the
 *   same way for every model step that uses them, and a step's mock script (which the worker
 *   renders like its prompt) for every step of that id;
 * - a step's `prompt` names an entry of `prompts`;
 * - `input_schema` and `output_schema` are JSON schemas that compile (draft-07, or 2020-12
 *   when `$schema` says so);
 * - every `mock` entry names a step of some workflow.
 *
 * A tool a step, a compensation or a mock script names without declaring it in `tools` is
 * not a problem (decisions §4's own sample names undeclared tools; the remit and the gateway
 * bound what a run may call): `undeclaredTools` lists them as notes, which `svc bundle
 * validate` prints as warnings.
 *
 * Problems carry a JSON pointer into the bundle. The checks are written defensively so they
 * also run on a bundle that fails the schema: one pass lists everything.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { firstNonLinearPattern, linearRegExp } from '../util/linear-regexp.js';
import { addFormats, withDecimalMultipleOf } from '../util/schema-options.js';
import { ajvErrorPath, pointerToken } from '../encoding/json-pointer.js';
import { schemaMessage } from '../encoding/schema-message.js';
import type { Bundle } from '../types.js';
import { validateBundleShape } from '../validators/compiled/bundle.js';
import { inPlaceRefCycle } from './schema-cycles.js';
import { tooDeep } from './json-depth.js';
import { templateRefs, type TemplateRef } from './templates.js';
import { didYouMeanMember } from '../util/did-you-mean.js';

/** Deepest nesting a bundle may have (objects and arrays), so every later walk is bounded. */
export const MAX_BUNDLE_DEPTH = 64;

/**
 * Most objects and arrays the distinct JSON schemas of one bundle may hold in all (identical
 * schemas count once): ajv compiles a property in 0.3–0.8 ms, and a post compiles every one
 * while svcd's event loop waits (20,000 properties in one input_schema took 6.5 s). A bound on
 * the worst case (≈1.5–4 s), set well above real bundles: a hundred steps with schemas of
 * twenty members each hold about 2,500.
 */
export const MAX_BUNDLE_SCHEMA_NODES = 5_000;

/** Semantic problems collected before the checks stop (the list is for a person to read). */
export const MAX_BUNDLE_PROBLEMS = 1_000;

/** One problem: where (a JSON pointer into the bundle) and what. */
export interface BundleProblem {
  path: string;
  message: string;
}

export type BundleValidation = { ok: true; bundle: Bundle } | { ok: false; problems: BundleProblem[] };

const MESSAGE_KEYWORDS = new Set(['pattern', 'enum', 'not', 'minProperties', 'minItems', 'const']);

// Workflow and step schemas are authored by people: same dialects and leniency as the run
// engine that enforces them (src/kernel/schema-check.ts), so what validates here compiles there.
let dialects: { draft07: Ajv; draft2020: Ajv2020 } | null = null;
function schemaDialects(): { draft07: Ajv; draft2020: Ajv2020 } {
  if (!dialects) {
    dialects = {
      draft07: withDecimalMultipleOf(new Ajv({ strict: false, allErrors: true, validateSchema: true, logger: false, code: { regExp: linearRegExp } })),
      draft2020: withDecimalMultipleOf(new Ajv2020({ strict: false, allErrors: true, validateSchema: true, logger: false, code: { regExp: linearRegExp } })),
    };
    addFormats(dialects.draft07);
    addFormats(dialects.draft2020);
  }
  return dialects;
}


function schemaProblems(errors: ErrorObject[]): BundleProblem[] {
  const out: BundleProblem[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    if (e.keyword === 'if' || e.keyword === 'propertyNames') continue;
    const { path, member } = ajvErrorPath(e);
    let message = schemaMessage(e, member === 'extra' ? `is not a member of this object${didYouMeanMember(e, String((e.params as { additionalProperty?: unknown }).additionalProperty))}` : undefined);
    const custom = (e.parentSchema as { 'x-message'?: string } | undefined)?.['x-message'];
    if (custom && MESSAGE_KEYWORDS.has(e.keyword)) message = custom;
    if (member === 'name' && !custom) message = `name ${message}`;
    if (e.keyword === 'type') message = typeMessage(message, custom, path, e.data, String((e.params as { type?: unknown }).type));
    const key = `${path}\n${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ path, message });
  }
  return out;
}

/**
 * What a newcomer needs besides "must be a string": at the root, what a bundle is and what the
 * file holds instead (an empty file, a list); for a number where a string belongs, what the
 * string must be and that YAML read it as a number (`version: 1.2` is a number,
 * `version: "1.2"` a string).
 */
function typeMessage(message: string, custom: string | undefined, path: string, data: unknown, expected: string): string {
  if (path === '') return `${message} with name, version and workflows, not ${data === null ? 'null (an empty file?)' : Array.isArray(data) ? 'a list' : typeof data === 'string' ? 'a single string' : `a ${typeof data}`}`;
  if (typeof data === 'number' && expected.split(',').includes('string')) return `${custom ?? message}, in quotes (YAML reads an unquoted ${String(data)} as a number)`;
  // An object whose members a person writes (a tools entry): say which.
  if (custom !== undefined && expected === 'object') return `${message}: ${custom}`;
  return message;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function jsonSchemaProblems(schema: unknown, path: string): BundleProblem[] {
  if (!isObj(schema)) return [];
  const cycle = inPlaceRefCycle(schema);
  if (cycle !== null) return [{ path: path + (cycle === '/' ? '' : cycle), message: 'is not a usable JSON schema: it refers to itself without end (a $ref cycle through allOf, anyOf, oneOf, not, if, then or else, which checks one value again and again)' }];
  const { draft07, draft2020 } = schemaDialects();
  const draft = typeof schema.$schema === 'string' && schema.$schema.includes('2020-12') ? draft2020 : draft07;
  try {
    if (!draft.validateSchema(schema)) {
      // The meta-schema reports one mistake several ways (type, enum, anyOf): keep the first per place.
      const seen = new Set<string>();
      const out: BundleProblem[] = [];
      for (const e of draft.errors ?? []) {
        if (seen.has(e.instancePath)) continue;
        seen.add(e.instancePath);
        out.push({ path: path + e.instancePath, message: `is not a valid JSON schema: ${e.message ?? 'invalid'}` });
      }
      return out.slice(0, 10);
    }
    const fn = draft.compile(schema);
    draft.removeSchema(schema);
    try {
      // A `$ref` cycle no value ends (`{"$ref": "#"}`, or one behind `if` for objects only)
      // overflows here, on a value of each JSON type, not on every run.
      for (const probe of CYCLE_PROBES) fn(probe);
    } catch (err) {
      if (err instanceof RangeError) return [{ path, message: 'is not a usable JSON schema: it refers to itself without end (a $ref cycle no value ends)' }];
      throw err;
    }
    return [];
  } catch (err) {
    // A pattern RE2 cannot run (src/util/linear-regexp.ts) fails the compile: name the pattern.
    const bad = firstNonLinearPattern(schema);
    if (bad) return [{ path: path + bad.pointer, message: bad.message }];
    return [{ path, message: `is not a valid JSON schema: ${(err as Error).message}` }];
  }
}

/** One value of each JSON type, run through a compiled schema to find a `$ref` cycle. */
const CYCLE_PROBES: readonly unknown[] = [null, true, 0, 1.5, '', 'x', [], [null], {}, { a: null }];

/** Objects and arrays in a JSON value (depth is bounded by MAX_BUNDLE_DEPTH already). */
function containerCount(value: unknown): number {
  let n = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    n++;
    for (const x of Array.isArray(v) ? v : Object.values(v)) if (x !== null && typeof x === 'object') stack.push(x);
  }
  return n;
}

/**
 * jsonSchemaProblems once per distinct schema text, within MAX_BUNDLE_SCHEMA_NODES for the
 * bundle: a thousand steps sharing `{type: object}` compile it once, and a bundle whose schemas
 * would take seconds to compile is refused at the schema that goes over.
 */
function schemaChecker(): (schema: unknown, path: string) => BundleProblem[] {
  const seen = new Map<string, BundleProblem[] | 'over'>();
  let nodes = 0;
  return (schema, path) => {
    if (!isObj(schema)) return [];
    const text = JSON.stringify(schema);
    let relative = seen.get(text);
    if (relative === undefined) {
      nodes += containerCount(schema);
      relative = nodes > MAX_BUNDLE_SCHEMA_NODES ? 'over' : jsonSchemaProblems(schema, '');
      seen.set(text, relative);
    }
    if (relative === 'over') return [{ path, message: `is not checked: the bundle's JSON schemas hold more than ${MAX_BUNDLE_SCHEMA_NODES} objects and arrays in all (identical schemas count once); compiling more would hold svcd's other requests for seconds` }];
    return relative.map((p) => ({ path: path + p.path, message: p.message }));
  };
}

/** What a `steps.<id>` template read wrongly is: a step the workflow lacks, or one that runs later. */
function stepReadMessage(prefix: string, template: string, id: string, wfName: string, known: boolean): string {
  return known ? `${prefix}template ${template} reads step "${id}", which does not run before this step` : `${prefix}template ${template} names no step of workflow "${wfName}"`;
}

/** A template source several steps share (a prompt, a mock script): scanned once, grouped by the step it reads. */
interface SharedSource {
  /** `steps.<id>` templates by id, each once per place it is reported (`key`) in document order. */
  byId: Map<string, Array<{ order: number; ref: TemplateRef }>>;
  /** Per workflow: the ids this source reads, latest-running first (unknown ids first of all). */
  sorted: Map<string, Array<{ j: number; id: string }>>;
}

/** The semantic checks (see the file comment). */
function semanticProblems(bundle: Obj): BundleProblem[] {
  const problems: BundleProblem[] = [];
  const full = () => problems.length >= MAX_BUNDLE_PROBLEMS;
  const checkSchema = schemaChecker();
  const shared = new Map<string, SharedSource>();
  const prompts = isObj(bundle.prompts) ? bundle.prompts : {};
  const workflows = isObj(bundle.workflows) ? bundle.workflows : {};
  const allStepIds = new Set<string>();

  // `__proto__` fits the name pattern, but as a key of a plain object it sets the object's
  // prototype instead of a member: a step so named vanished from its run, which never ran.
  const reserved = (path: string) => problems.push({ path, message: '"__proto__" is reserved: as a JavaScript object key it names the prototype, not a member' });
  if (Object.hasOwn(prompts, '__proto__')) reserved('/prompts/__proto__');
  if (Object.hasOwn(workflows, '__proto__')) reserved('/workflows/__proto__');

  // Prompt templates: well formed (checked once, at the prompt).
  for (const [name, text] of Object.entries(prompts)) {
    for (const ref of templateRefs(text, `/prompts/${pointerToken(name)}`)) {
      if (ref.error) problems.push({ path: ref.pointer, message: `template ${ref.template}: ${ref.error}` });
    }
  }

  for (const [wfName, wf] of Object.entries(workflows)) {
    if (!isObj(wf)) continue;
    const wfPath = `/workflows/${pointerToken(wfName)}`;
    if (full()) break;
    problems.push(...checkSchema(wf.input_schema, `${wfPath}/input_schema`));
    const steps = Array.isArray(wf.steps) ? wf.steps : [];
    const index = new Map<string, number>();
    steps.forEach((s, i) => {
      if (!isObj(s) || typeof s.id !== 'string') return;
      if (s.id === '__proto__') reserved(`${wfPath}/steps/${i}/id`);
      allStepIds.add(s.id);
      if (index.has(s.id)) {
        problems.push({ path: `${wfPath}/steps/${i}/id`, message: `duplicate step id "${s.id}" (also step ${index.get(s.id)})` });
      } else index.set(s.id, i);
    });

    // A template's steps.<id> must name a step that runs before `limit` (or `self` itself).
    const checkRefs = (value: unknown, base: string, stepIndex: number, self: string | null, reportAt?: string, via?: string) => {
      for (const ref of templateRefs(value, base)) {
        const at = reportAt ?? ref.pointer;
        const prefix = via ? `${via} ` : '';
        if (ref.error) {
          if (!reportAt) problems.push({ path: at, message: `template ${ref.template}: ${ref.error}` });
          continue;
        }
        if (ref.path![0] !== 'steps') continue;
        const id = ref.path![1]!;
        const j = index.get(id);
        if (self !== null && id === self) continue;
        if (j === undefined || j >= stepIndex) problems.push({ path: at, message: stepReadMessage(prefix, ref.template, id, wfName, j !== undefined) });
      }
    };

    /**
     * checkRefs for a source many steps share (a prompt, a mock script), in time linear in the
     * source and the steps together: the source is scanned once for the whole bundle (its
     * malformed templates reported then, when `reportAt` is not given), and per workflow its
     * `steps.<id>` reads are sorted by the step they read, so a step walks only the reads it
     * reports (each a problem, at most MAX_BUNDLE_PROBLEMS in all). Rescanning a prompt for
     * each of a thousand steps held svcd for seconds. Same problems as checkRefs, in the same order.
     */
    const checkShared = (key: string, read: () => unknown, base: string, stepIndex: number, reportAt?: string, via?: string) => {
      let source = shared.get(key);
      if (source === undefined) {
        source = { byId: new Map(), sorted: new Map() };
        shared.set(key, source);
        const once = new Set<string>();
        templateRefs(read(), base).forEach((ref, order) => {
          if (ref.error) {
            if (!reportAt && !full()) problems.push({ path: ref.pointer, message: `template ${ref.template}: ${ref.error}` });
            return;
          }
          if (ref.path![0] !== 'steps') return;
          const dedup = `${reportAt ? '' : ref.pointer}\n${ref.template}`;
          if (once.has(dedup)) return;
          once.add(dedup);
          const id = ref.path![1]!;
          const list = source!.byId.get(id);
          if (list) list.push({ order, ref });
          else source!.byId.set(id, [{ order, ref }]);
        });
      }
      let sorted = source.sorted.get(wfName);
      if (sorted === undefined) {
        sorted = [...source.byId.keys()].map((id) => ({ id, j: index.get(id) ?? Infinity })).sort((a, b) => (a.j === b.j ? 0 : a.j > b.j ? -1 : 1));
        source.sorted.set(wfName, sorted);
      }
      const found: Array<{ order: number; problem: BundleProblem }> = [];
      const prefix = via ? `${via} ` : '';
      for (const { id, j } of sorted) {
        if (j < stepIndex || found.length >= MAX_BUNDLE_PROBLEMS) break;
        for (const { order, ref } of source.byId.get(id)!) {
          found.push({ order, problem: { path: reportAt ?? ref.pointer, message: stepReadMessage(prefix, ref.template, id, wfName, j !== Infinity) } });
        }
      }
      found.sort((a, b) => a.order - b.order);
      for (const f of found) if (!full()) problems.push(f.problem);
    };

    for (const [i, s] of steps.entries()) {
      if (full()) break;
      if (!isObj(s)) continue;
      const sp = `${wfPath}/steps/${i}`;
      if (s.args !== undefined) checkRefs(s.args, `${sp}/args`, i, null);
      if (isObj(s.compensate)) {
        if (s.compensate.args !== undefined) checkRefs(s.compensate.args, `${sp}/compensate/args`, i, typeof s.id === 'string' ? s.id : null);
      }
      if (s.kind === 'model' && typeof s.prompt === 'string') {
        if (!Object.prototype.hasOwnProperty.call(prompts, s.prompt)) {
          const known = Object.keys(prompts);
          problems.push({ path: `${sp}/prompt`, message: `unknown prompt "${s.prompt}"${known.length ? ` (prompts: ${known.join(', ')})` : ' (the bundle has no prompts)'}` });
        } else {
          checkShared(`prompt\n${s.prompt}`, () => prompts[s.prompt as string], '', i, `${sp}/prompt`, `prompt "${s.prompt}":`);
        }
      }
      if (s.output_schema !== undefined) problems.push(...checkSchema(s.output_schema, `${sp}/output_schema`));
      // The worker renders a step's whole mock script like its prompt (decisions §4 paths).
      if (typeof s.id === 'string' && isObj(bundle.mock) && Object.prototype.hasOwnProperty.call(bundle.mock, s.id)) {
        checkShared(`mock\n${s.id}`, () => (bundle.mock as Obj)[s.id as string], `/mock/${pointerToken(s.id)}`, i);
      }
    }
  }

  const mock = isObj(bundle.mock) ? bundle.mock : {};
  for (const stepId of Object.keys(mock)) {
    const mp = `/mock/${pointerToken(stepId)}`;
    if (!allStepIds.has(stepId)) problems.push({ path: mp, message: `mock script names no step of any workflow ("${stepId}")` });
  }
  // A mock script of a step id that several workflows share is checked in each: report once.
  const seen = new Set<string>();
  return problems.slice(0, MAX_BUNDLE_PROBLEMS).filter((p) => {
    const key = `${p.path}\n${p.message}`;
    return seen.has(key) ? false : (seen.add(key), true);
  });
}

/**
 * Tools the bundle names (a step's `tool`, a model step's `tools`, `compensate.tool`, a mock
 * script's tool calls and actions) that its `tools` map does not declare: notes for the
 * author, not problems (see the file comment).
 */
export function undeclaredTools(bundle: unknown): BundleProblem[] {
  if (!isObj(bundle)) return [];
  const tools = isObj(bundle.tools) ? bundle.tools : {};
  const notes: BundleProblem[] = [];
  const check = (tool: unknown, path: string) => {
    if (typeof tool === 'string' && !Object.prototype.hasOwnProperty.call(tools, tool)) {
      notes.push({ path, message: `tool "${tool}" is not declared in the bundle's tools` });
    }
  };
  for (const [wfName, wf] of Object.entries(isObj(bundle.workflows) ? bundle.workflows : {})) {
    if (!isObj(wf) || !Array.isArray(wf.steps)) continue;
    wf.steps.forEach((s, i) => {
      if (!isObj(s)) return;
      const sp = `/workflows/${pointerToken(wfName)}/steps/${i}`;
      check(s.tool, `${sp}/tool`);
      if (Array.isArray(s.tools)) s.tools.forEach((t, j) => check(t, `${sp}/tools/${j}`));
      if (isObj(s.compensate)) check(s.compensate.tool, `${sp}/compensate/tool`);
    });
  }
  for (const [stepId, script] of Object.entries(isObj(bundle.mock) ? bundle.mock : {})) {
    if (!isObj(script)) continue;
    const mp = `/mock/${pointerToken(stepId)}`;
    if (Array.isArray(script.tool_calls)) script.tool_calls.forEach((c, j) => isObj(c) && check(c.tool, `${mp}/tool_calls/${j}/tool`));
    if (Array.isArray(script.actions)) script.actions.forEach((a, j) => isObj(a) && check(a.tool, `${mp}/actions/${j}/tool`));
  }
  return notes;
}

/**
 * Model steps the bundle's `mock` has no script for. Not a problem (a bundle for a real model
 * needs none), but under the mock provider, `svc worker`'s default, such a step fails with
 * `mock_script_missing`: `svc bundle validate` prints them as warnings.
 */
export function modelStepsWithoutMock(bundle: unknown): BundleProblem[] {
  if (!isObj(bundle)) return [];
  const mock = isObj(bundle.mock) ? bundle.mock : {};
  const notes: BundleProblem[] = [];
  for (const [wfName, wf] of Object.entries(isObj(bundle.workflows) ? bundle.workflows : {})) {
    if (!isObj(wf) || !Array.isArray(wf.steps)) continue;
    wf.steps.forEach((s, i) => {
      if (!isObj(s) || s.kind !== 'model' || typeof s.id !== 'string' || Object.prototype.hasOwnProperty.call(mock, s.id)) return;
      notes.push({ path: `/workflows/${pointerToken(wfName)}/steps/${i}`, message: `model step "${s.id}" has no mock script: under the mock provider (svc worker's default) it fails with mock_script_missing` });
    });
  }
  return notes;
}

/**
 * `{{input.…}}` templates naming a member the workflow's input schema forbids (an object with
 * `additionalProperties: false` that lists no such property): a typo such as
 * `{{input.invoce_id}}` would pass validation and fail every run with template_invalid. Read
 * in the workflow's steps, in the prompts they name and in the mock scripts of its model
 * steps (rendered with the run's input too). Notes, not problems: a schema may
 * reach a member another way (patternProperties, a $ref) that this walk does not follow.
 */
export function inputTemplatesOutsideSchema(bundle: unknown): BundleProblem[] {
  if (!isObj(bundle)) return [];
  const prompts = isObj(bundle.prompts) ? bundle.prompts : {};
  const mock = isObj(bundle.mock) ? bundle.mock : {};
  const notes: BundleProblem[] = [];
  for (const [wfName, wf] of Object.entries(isObj(bundle.workflows) ? bundle.workflows : {})) {
    if (!isObj(wf) || !Array.isArray(wf.steps) || !isObj(wf.input_schema)) continue;
    const wp = `/workflows/${pointerToken(wfName)}`;
    const refs: Array<{ at: string; template: string; path: string[] }> = [];
    const promptsSeen = new Set<string>();
    wf.steps.forEach((step, i) => {
      for (const r of templateRefs(step, `${wp}/steps/${i}`)) if (r.path) refs.push({ at: r.pointer, template: r.template, path: r.path });
      const name = isObj(step) && typeof step.prompt === 'string' ? step.prompt : null;
      if (name !== null && Object.hasOwn(prompts, name) && !promptsSeen.has(name)) {
        promptsSeen.add(name);
        for (const r of templateRefs(prompts[name], `/prompts/${pointerToken(name)}`)) if (r.path) refs.push({ at: r.pointer, template: r.template, path: r.path });
      }
      // The worker renders a model step's mock script like its prompt, with the run's input.
      const id = isObj(step) && step.kind === 'model' && typeof step.id === 'string' ? step.id : null;
      if (id !== null && Object.hasOwn(mock, id)) {
        for (const r of templateRefs(mock[id], `/mock/${pointerToken(id)}`)) if (r.path) refs.push({ at: r.pointer, template: r.template, path: r.path });
      }
    });
    for (const r of refs) {
      if (r.path[0] !== 'input') continue;
      let schema: unknown = wf.input_schema;
      for (const [depth, member] of r.path.slice(1).entries()) {
        if (!isObj(schema)) break;
        const props = isObj(schema.properties) ? schema.properties : {};
        if (Object.hasOwn(props, member)) {
          schema = props[member];
          continue;
        }
        if (schema.additionalProperties === false && !isObj(schema.patternProperties)) {
          const named = r.path.slice(0, depth + 2).join('.');
          notes.push({ path: r.at, message: `${r.template} names ${named}, which workflow "${wfName}"'s input_schema does not allow (its members: ${Object.keys(props).join(', ') || 'none'}); every run would fail with template_invalid` });
        }
        break;
      }
    }
  }
  return notes;
}

/**
 * Templates inside a longer string of a step's `args` or `compensate.args` that read a member
 * the schemas say is a string (the workflow's input_schema, or an earlier step's
 * output_schema): D 4 inserts its JSON text, quotes included (`reports/"inv_1".json`), which
 * is seldom what a path or URL wants; `{{path | text}}` inserts the bare text. Notes: a
 * message that quotes on purpose stays as written.
 */
export function quotedStringTemplates(bundle: unknown): BundleProblem[] {
  if (!isObj(bundle)) return [];
  const notes: BundleProblem[] = [];
  for (const [wfName, wf] of Object.entries(isObj(bundle.workflows) ? bundle.workflows : {})) {
    if (!isObj(wf) || !Array.isArray(wf.steps)) continue;
    const wp = `/workflows/${pointerToken(wfName)}`;
    const outputSchemas = new Map<string, unknown>();
    for (const step of wf.steps) if (isObj(step) && typeof step.id === 'string') outputSchemas.set(step.id, step.output_schema);
    wf.steps.forEach((step, i) => {
      if (!isObj(step)) return;
      const refs = [
        ...templateRefs(step.args, `${wp}/steps/${i}/args`),
        ...(isObj(step.compensate) ? templateRefs(step.compensate.args, `${wp}/steps/${i}/compensate/args`) : []),
      ];
      for (const r of refs) {
        if (!r.path || !r.embedded || r.filter) continue;
        const [root, schema, members] = r.path[0] === 'input' ? ['input', wf.input_schema, r.path.slice(1)] : [r.path.slice(0, 3).join('.'), outputSchemas.get(r.path[1]!), r.path.slice(3)];
        if (root === undefined || !isStringSchema(memberSchema(schema, members))) continue;
        const path = r.path.join('.');
        notes.push({ path: r.pointer, message: `${r.template} inside a longer string inserts the JSON text of ${path}, a string, quotes included; write {{${path} | text}} for the bare text` });
      }
    });
  }
  return notes;
}

/** The schema of `members` below `schema`, through `properties` only; undefined where that stops. */
function memberSchema(schema: unknown, members: readonly string[]): unknown {
  let at = schema;
  for (const m of members) {
    if (!isObj(at) || !isObj(at.properties) || !Object.hasOwn(at.properties, m)) return undefined;
    at = at.properties[m];
  }
  return at;
}

function isStringSchema(schema: unknown): boolean {
  return isObj(schema) && (schema.type === 'string' || (Array.isArray(schema.type) && schema.type.length === 1 && schema.type[0] === 'string'));
}

/** Keywords whose failure may come from a templated member's placeholder, not the output. */
const UNCERTAIN_KEYWORDS = new Set(['anyOf', 'oneOf', 'not', 'if', 'contains', 'uniqueItems', 'const', 'enum', 'dependencies', 'dependentSchemas', 'unevaluatedProperties', 'unevaluatedItems']);

/** JSON pointers of the strings in `value` that hold a template. */
function templatedPointers(value: unknown, at: string): string[] {
  if (typeof value === 'string') return value.includes('{{') ? [at] : [];
  if (Array.isArray(value)) return value.flatMap((v, i) => templatedPointers(v, `${at}/${i}`));
  if (isObj(value)) return Object.entries(value).flatMap(([k, v]) => templatedPointers(v, `${at}/${pointerToken(k)}`));
  return [];
}

/**
 * Mock scripts that would not rehearse what their author meant (svc-bundle(5) VALIDATION):
 * a script for a step that is a tool or action step in every workflow (the mock provider
 * answers model steps only: it is never played); a scripted tool call of a tool the model step
 * does not offer (the worker answers it with tool_not_offered, as it would a real model's);
 * and a scripted output the step's output_schema refuses (every run would fail with
 * output_invalid), unless the script fails (error) or what the schema says could be about a
 * templated string, which the worker renders into another value.
 * Notes, not problems: the bundle is still what its author signed.
 */
export function mockScriptNotes(bundle: unknown): BundleProblem[] {
  if (!isObj(bundle) || !isObj(bundle.mock)) return [];
  const mock = bundle.mock;
  const notes: BundleProblem[] = [];
  const kinds = new Map<string, Set<string>>();
  for (const [wfName, wf] of Object.entries(isObj(bundle.workflows) ? bundle.workflows : {})) {
    if (!isObj(wf) || !Array.isArray(wf.steps)) continue;
    wf.steps.forEach((s, i) => {
      if (!isObj(s) || typeof s.id !== 'string') return;
      if (!kinds.has(s.id)) kinds.set(s.id, new Set());
      if (typeof s.kind === 'string') kinds.get(s.id)!.add(s.kind);
      if (s.kind !== 'model' || !Object.hasOwn(mock, s.id) || !isObj(mock[s.id])) return;
      const script = mock[s.id] as Obj;
      const mp = `/mock/${pointerToken(s.id)}`;
      const offered = Array.isArray(s.tools) ? s.tools.filter((t): t is string => typeof t === 'string') : [];
      if (Array.isArray(script.tool_calls)) {
        script.tool_calls.forEach((c, j) => {
          if (!isObj(c) || typeof c.tool !== 'string' || offered.includes(c.tool)) return;
          notes.push({
            path: `${mp}/tool_calls/${j}/tool`,
            message: `tool "${c.tool}" is not among the tools step "${s.id}" of workflow "${wfName}" offers (${offered.length ? `its tools: ${offered.join(', ')}` : 'it lists none'}): the worker answers this call with tool_not_offered, as it would a real model's; add the tool to the step's tools`,
          });
        });
      }
      if (s.output_schema === undefined || script.error !== undefined) return;
      const output = script.output === undefined ? null : script.output;
      if (jsonSchemaProblems(s.output_schema, '').length > 0) return;
      const schema = s.output_schema;
      if (!isObj(schema) && typeof schema !== 'boolean') return;
      const { draft07, draft2020 } = schemaDialects();
      const draft = isObj(schema) && typeof schema.$schema === 'string' && schema.$schema.includes('2020-12') ? draft2020 : draft07;
      let errors: ErrorObject[] = [];
      try {
        const fn = draft.compile(schema);
        if (isObj(schema)) draft.removeSchema(schema);
        if (!fn(output)) errors = fn.errors ?? [];
      } catch {
        return;
      }
      // A string holding a template becomes another value when the worker renders it: what
      // the schema says of it (or of an alternative that might hold once it is rendered) is
      // not judged here, only what is certain (a member it forbids, one it requires).
      const templated = templatedPointers(output, '');
      if (templated.length > 0 && errors.some((e) => UNCERTAIN_KEYWORDS.has(e.keyword))) return;
      const first = errors.find((e) => !templated.some((t) => e.instancePath === t || e.instancePath.startsWith(`${t}/`)));
      if (!first) return;
      const where = ajvErrorPath(first).path || '/';
      notes.push({
        path: script.output === undefined ? mp : `${mp}/output`,
        message: `${script.output === undefined ? 'the script has no output (the step would output null), which' : 'this output'} does not match the output_schema of step "${s.id}" of workflow "${wfName}" (${where} ${schemaMessage(first)}): under the mock provider every run would fail with output_invalid`,
      });
    });
  }
  for (const stepId of Object.keys(mock)) {
    const k = kinds.get(stepId);
    if (!k || k.has('model')) continue;
    notes.push({
      path: `/mock/${pointerToken(stepId)}`,
      message: `step "${stepId}" is a ${[...k].sort().join(' and ')} step: the mock provider answers model steps only (a tool or action step calls the gateway), so this script is never played`,
    });
  }
  const seen = new Set<string>();
  return notes.filter((n) => {
    const key = `${n.path}\n${n.message}`;
    return seen.has(key) ? false : (seen.add(key), true);
  });
}

/** Validates a bundle value; lists every problem with its JSON pointer. Never throws. */
export function validateBundle(value: unknown): BundleValidation {
  const deep = tooDeep(value, MAX_BUNDLE_DEPTH);
  if (deep !== null) return { ok: false, problems: [{ path: deep, message: `is nested deeper than ${MAX_BUNDLE_DEPTH} levels` }] };
  const problems: BundleProblem[] = [];
  if (!validateBundleShape(value)) problems.push(...schemaProblems(validateBundleShape.errors ?? []));
  if (isObj(value)) {
    const seen = new Set(problems.map((p) => `${p.path}\n${p.message}`));
    for (const p of semanticProblems(value)) {
      const key = `${p.path}\n${p.message}`;
      if (!seen.has(key)) {
        seen.add(key);
        problems.push(p);
      }
    }
  }
  return problems.length === 0 ? { ok: true, bundle: value as Bundle } : { ok: false, problems };
}

/**
 * The CEL environment every policy condition is checked and evaluated in (decisions 5.1),
 * through `@marcbachmann/cel-js`. `action` and `run` are declared with their field types so a
 * condition is type-checked when the policy is posted; `run.remit.grants(x)` is a member
 * function. JSON numbers in `action.args` and `run.input` become CEL `int` when they are
 * integers and `double` otherwise; CEL compares int and double with each other. Conversions
 * from a string are CEL's, not cel-js's looser ones (src/policy/cel-conversions.ts).
 */
import { Environment, type ParseResult } from '@marcbachmann/cel-js';
import '../util/regexp-guard.js'; // any JS RegExp cel-js runs on worker input (`matches` itself is RE2: re2-matches.ts)
import type { PolicyAction, PolicyRunContext } from '../types.js';
import { re2Matches } from './re2-matches.js';
import { celDoubleFromString, celDurationFromString, celIntFromDouble, celIntFromString, celTimestampFromString, celUintFromString } from './cel-conversions.js';

/** Structural limits for one condition, checked at parse time. */
export const CEL_LIMITS = {
  maxAstNodes: 2000,
  maxDepth: 32,
  maxListElements: 256,
  maxMapEntries: 256,
  maxCallArguments: 16,
} as const;

/** The value of `run.remit` inside an expression: grants are read through `grants(x)` only. */
export class RemitView {
  readonly autonomy: string;
  readonly tools: string[];
  readonly scopes: string[];
  readonly grantSet: ReadonlySet<string>;

  constructor(remit: PolicyRunContext['remit']) {
    this.autonomy = remit.autonomy;
    this.tools = [...remit.tools];
    this.scopes = [...remit.scopes];
    this.grantSet = new Set(remit.grants);
  }
}

/** The fields of each type a condition reads (decisions 5.1). */
export const POLICY_TYPES = {
  Requester: { id: 'string', role: 'string', manager: 'string' },
  Usage: { tokens: 'int', usd: 'double' },
  Remit: { autonomy: 'string', tools: 'list<string>', scopes: 'list<string>' },
  Action: {
    tool: 'string',
    connector: 'string',
    operation: 'string',
    args: 'map<string, dyn>',
    writes: 'bool',
    system_of_record: 'bool',
    summary: 'string',
  },
  Run: {
    id: 'string',
    bundle: 'string',
    workflow: 'string',
    department: 'string',
    requested_by: 'Requester',
    input: 'dyn',
    usage: 'Usage',
    remit: 'Remit',
  },
} as const;

/** The members a condition can name after `path.` (`run.usage` → tokens, usd), or null. */
export function membersOf(path: string): string[] | null {
  const types: Readonly<Record<string, Readonly<Record<string, string>>>> = POLICY_TYPES;
  const fieldsOf = (type: string | undefined) => (type !== undefined && Object.hasOwn(types, type) ? types[type]! : undefined);
  const [root, ...rest] = path.split('.');
  let type: string | undefined = root === 'action' ? 'Action' : root === 'run' ? 'Run' : undefined;
  for (const name of rest) {
    const fields = fieldsOf(type);
    type = fields && Object.hasOwn(fields, name) ? fields[name] : undefined;
  }
  const fields = fieldsOf(type);
  if (!fields) return null;
  return [...Object.keys(fields), ...(type === 'Remit' ? ['grants(class)'] : [])];
}

function buildEnvironment(): Environment {
  return new Environment({ limits: CEL_LIMITS })
    .registerType('Requester', { fields: { ...POLICY_TYPES.Requester } })
    .registerType('Usage', { fields: { ...POLICY_TYPES.Usage } })
    .registerType('Remit', { ctor: RemitView, fields: { ...POLICY_TYPES.Remit } })
    .registerType('Action', { fields: { ...POLICY_TYPES.Action } })
    .registerType('Run', { fields: { ...POLICY_TYPES.Run } })
    .registerVariable('action', 'Action', { description: 'the proposed action' })
    .registerVariable('run', 'Run', { description: 'the run proposing it' })
    .registerFunction('Remit.grants(string): bool', (remit: RemitView, dataClass: string) => remit.grantSet.has(dataClass), {
      description: 'true when the remit grants the data class',
    });
}

type Handler = (...args: unknown[]) => unknown;

/**
 * The strict conversions, each given cel-js's own overload: from a string, `int` and `double`
 * return the value, the others hand cel-js a canonical text so it builds its own value type
 * (UnsignedInt, Date, Duration) from a string it reads right; `int(double)` checks the range
 * and hands the double on. `refused` is a call the strict one must refuse, by throwing or
 * answering false (checked at startup).
 */
const STRICT_CONVERSIONS: ReadonlyArray<{ name: string; from: 'string' | 'double'; refused: string; strict: (original: Handler) => Handler; signature?: string }> = [
  { name: 'int', from: 'string', refused: 'int("")', strict: () => (s) => celIntFromString(s as string) },
  { name: 'int', from: 'double', refused: 'int(1e30)', strict: (original) => (d) => original(celIntFromDouble(d as number)) },
  { name: 'uint', from: 'string', refused: 'uint("")', strict: (original) => (s) => original(celUintFromString(s as string).toString()) },
  { name: 'double', from: 'string', refused: 'double("")', strict: () => (s) => celDoubleFromString(s as string) },
  { name: 'timestamp', from: 'string', refused: 'timestamp("")', strict: (original) => (s) => original(new Date(celTimestampFromString(s as string)).toISOString()) },
  { name: 'duration', from: 'string', refused: 'duration("")', strict: (original) => (s) => original(`${celDurationFromString(s as string)}ns`) },
  // Not a conversion, swapped the same way: `matches` on RE2 (src/policy/re2-matches.ts). The
  // JS RegExp reads `\Q…\E` as the letters Q and E; RE2 quotes with it, so the call below
  // is true there and false on RE2 (a refusal, for the check that the swap took).
  { name: 'matches', from: 'string', signature: 'string.matches(string):', refused: '"Qa.cE".matches("^\\\\Qa.c\\\\E$")', strict: () => (text, pattern) => re2Matches(text as string, pattern as string) },
];

interface OverloadDeclaration {
  signature: string;
  handler: Handler;
}

/**
 * Puts the strict conversions in place of cel-js's `int(string)` and the like. cel-js refuses a
 * second overload with a signature it has and offers no way to replace one, so each is swapped
 * in this environment's own candidate list (the one a checked call of the function carries),
 * for type-checked and dynamic (`dyn`) calls alike; cel-js's shared registry is left as it is.
 * When a cel-js upgrade moves that list, this throws at startup rather than silently bringing
 * back conversions that read "" as 0.
 */
function installStrictConversions(env: Environment, keepJsMatches = false): void {
  for (const { name, from, refused: refusedCall, strict, signature = `${name}(${from}):` } of STRICT_CONVERSIONS) {
    if (keepJsMatches && name === 'matches') continue;
    const program = env.parse(refusedCall);
    program.check();
    const list = (program.ast as unknown as { candidates?: { declarations?: OverloadDeclaration[] } }).candidates?.declarations;
    const i = list?.findIndex((d) => d.signature.startsWith(signature)) ?? -1;
    if (!list || i < 0) throw new Error(`cel-js internals changed: cannot install the strict ${name}(${from})`);
    const original = list[i]!;
    const handler = strict(original.handler);
    list[i] = Object.freeze(Object.assign(Object.create(Object.getPrototypeOf(original) as object) as OverloadDeclaration, original, { handler }));
    let refused = false;
    try {
      refused = env.evaluate(refusedCall) === false;
    } catch {
      refused = true;
    }
    if (!refused) throw new Error(`cel-js internals changed: ${refusedCall} still converts`);
  }
}

/** Built once: creating an environment is the expensive part of CEL. */
export const policyEnvironment: Environment = buildEnvironment();
installStrictConversions(policyEnvironment);

/** Conditions being evaluated now (`evaluateCondition`). */
let evaluating = 0;

/**
 * Every error cel-js makes is given, in its constructor, a copy of the condition's line with a
 * caret, found by walking the condition's text from its start up to the failing node: an
 * error per element of `exists`/`all` (`x.f` where an item has no `f`; cel-js catches them,
 * as CEL says) then costs the length of the condition each, so a 200,000-character condition
 * over 4,000 such items held svcd for 8.7 s, and one over the 100,000 items of a 1 MiB
 * proposal for minutes, under a cost bound (condition-cost.ts) of a few steps an item (stall
 * sweep, 2026-11-30; docs/design.md). A decision reads an error's `summary` only, so while a
 * condition evaluates its AST nodes hide their text from cel-js's errors: no highlight is
 * made. cel-js has no option for that; its AST class is the one `input` getter patched here
 * (parse and type-check errors keep their highlight).
 */
function installPlainEvaluationErrors(env: Environment): void {
  const proto = Object.getPrototypeOf(env.parse('true').ast) as object;
  const desc = Object.getOwnPropertyDescriptor(proto, 'input');
  if (!desc?.get) throw new Error('cel-js internals changed: its AST nodes have no input getter');
  const original = desc.get;
  Object.defineProperty(proto, 'input', {
    ...desc,
    get(this: unknown) {
      return evaluating > 0 ? undefined : original.call(this);
    },
  });
  const probe = env.parse('{"a": 1}.b == 1');
  let message = '';
  try {
    evaluateCondition(probe, {});
  } catch (err) {
    message = String((err as Error).message);
  }
  if (message !== 'No such key: b') throw new Error(`cel-js internals changed: an evaluation error still formats its condition (${JSON.stringify(message)})`);
}

/**
 * Evaluates a compiled condition (see installPlainEvaluationErrors): what `program(context)`
 * returns or throws, the error's `summary` as it was, its `message` without the highlight.
 */
export function evaluateCondition(program: CelProgram, context: Record<string, unknown>): unknown {
  evaluating++;
  // Nor a stack trace: capturing one is most of what an error costs (≈10 µs).
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return program(context);
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
    evaluating--;
  }
}

installPlainEvaluationErrors(policyEnvironment);

let jsMatches: Environment | null = null;

/**
 * The policy environment as svc ran it until 2026-11-29: `matches` on cel-js's JS RegExp
 * (under the process's backtracking guard), everything else as `policyEnvironment`. Only
 * replay uses it, to check a decision recorded then (src/kernel/replay.ts): RE2 and the JS
 * RegExp read some text differently even where a pattern is the same in both (`.` and `\r`,
 * `\s` and U+00A0, characters outside the BMP). Built on first use.
 */
export function jsMatchesPolicyEnvironment(): Environment {
  if (jsMatches === null) {
    const env = buildEnvironment();
    installStrictConversions(env, true);
    // Its own candidate lists: the RE2 swap in policyEnvironment must not have reached it.
    if (env.evaluate('"Qa.cE".matches("^\\\\Qa.c\\\\E$")') !== true) throw new Error('cel-js internals changed: the environment of JS RegExp `matches` runs RE2');
    jsMatches = env;
  }
  return jsMatches;
}

/** A parsed condition, callable with a context from `celContext`. */
export type CelProgram = ParseResult;

/** JSON → CEL values: safe integers become bigint (CEL int), the rest stays as it is. */
export function celValue(value: unknown): unknown {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : value;
  if (Array.isArray(value)) return value.map(celValue);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, celValue(v)]));
  }
  return value;
}

/** The `action` and `run` variables for one evaluation. */
export function celContext(action: PolicyAction, run: PolicyRunContext): Record<string, unknown> {
  return {
    action: {
      tool: action.tool,
      connector: action.connector,
      operation: action.operation,
      args: celValue(action.args ?? {}),
      writes: action.writes,
      system_of_record: action.system_of_record,
      summary: action.summary ?? '',
    },
    run: {
      id: run.id,
      bundle: run.bundle,
      workflow: run.workflow,
      department: run.department,
      requested_by: { id: run.requested_by.id, role: run.requested_by.role, manager: run.requested_by.manager },
      input: celValue(run.input ?? null),
      usage: { tokens: toBigInt(run.usage?.tokens), usd: Number(run.usage?.usd ?? 0) },
      remit: new RemitView(run.remit),
    },
  };
}

function toBigInt(value: unknown): bigint {
  const n = Math.trunc(Number(value ?? 0));
  return Number.isFinite(n) ? BigInt(n) : 0n;
}

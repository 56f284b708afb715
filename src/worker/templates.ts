/**
 * `{{path}}` templates as decisions §4 defines them, for what the worker renders itself: the
 * step's prompt and the mock provider's script. Paths read `input.*` and `steps.<id>.output.*`;
 * a string that is exactly one template yields the raw value, an embedded template its JSON
 * text (a string embeds quoted, which also marks where data begins and ends in a prompt). A
 * missing value is a deterministic `template_invalid`.
 */
import { StepError } from './errors.js';

const TEMPLATE = /\{\{\s*([^{}]*?)\s*\}\}/g;
const WHOLE = /^\{\{\s*([^{}]*?)\s*\}\}$/;

/** Path segments of `a.b[0].c` → ['a', 'b', '0', 'c']. */
export function pathSegments(path: string): string[] {
  return path
    .replace(/\[(\d+)\]/g, '.$1')
    .split('.')
    .filter((s) => s.length > 0);
}

/** The paths a text's templates read, in order of appearance. */
export function templatePaths(text: string): string[] {
  return [...text.matchAll(TEMPLATE)].map((m) => m[1]!);
}

/** The paths the templates in any string of `value` read (a mock script, say), in order. */
export function deepTemplatePaths(value: unknown): string[] {
  if (typeof value === 'string') return templatePaths(value);
  if (Array.isArray(value)) return value.flatMap(deepTemplatePaths);
  if (value && typeof value === 'object') return Object.values(value).flatMap(deepTemplatePaths);
  return [];
}

/** The value at `path` in `ctx`; `found: false` when any segment is missing. */
export function lookup(ctx: unknown, path: string): { found: boolean; value: unknown } {
  let cur: unknown = ctx;
  for (const seg of pathSegments(path)) {
    if (cur === null || typeof cur !== 'object' || !Object.prototype.hasOwnProperty.call(cur, seg)) return { found: false, value: undefined };
    cur = (cur as Record<string, unknown>)[seg];
  }
  return { found: true, value: cur };
}

/** Reads the value of one template path (throws `template_invalid` when there is none). */
export type Resolver = (path: string, where: string) => unknown;

/** The resolver of decisions §4 over a `{input, steps}` context. */
export function contextResolver(ctx: unknown): Resolver {
  return (path, where) => {
    if (!/^(input|steps)(\.|\[|$)/.test(path)) throw new StepError('template_invalid', `${where}: template {{${path}}} must read input.* or steps.<id>.output.*`, true);
    const r = lookup(ctx, path);
    if (!r.found || r.value === undefined) throw new StepError('template_invalid', `${where}: template {{${path}}} names no value`, true);
    return r.value;
  };
}

function asResolver(ctx: unknown | Resolver): Resolver {
  return typeof ctx === 'function' ? (ctx as Resolver) : contextResolver(ctx);
}

/** Renders one string: a lone template gives the raw value, embedded ones their JSON text. */
export function renderString(text: string, ctx: unknown | Resolver, where = 'template'): unknown {
  const resolve = asResolver(ctx);
  const whole = WHOLE.exec(text);
  if (whole) return resolve(whole[1]!, where);
  return text.replace(TEMPLATE, (_m, path: string) => JSON.stringify(resolve(path, where)));
}

/** Renders every string inside a JSON value (keys are left as they are). */
export function renderDeep(value: unknown, ctx: unknown | Resolver, where = 'template'): unknown {
  const resolve = asResolver(ctx);
  if (typeof value === 'string') return renderString(value, resolve, where);
  if (Array.isArray(value)) return value.map((v, i) => renderDeep(v, resolve, `${where}[${i}]`));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = renderDeep(v, resolve, `${where}.${k}`);
    return out;
  }
  return value;
}

/** Renders a prompt to text (a prompt that is one template of an object gives its JSON). */
export function renderPrompt(text: string, ctx: unknown | Resolver, where = 'prompt'): string {
  const v = renderString(text, ctx, where);
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/**
 * Step templates (decisions 4): `{{path}}` inside any string of a step's `args` (and of a
 * prompt) reads `input.…` or `steps.<id>.output.…` of the run. A string that is exactly one
 * template yields the raw value (an object stays an object, a number a number); a template
 * embedded in a longer string is replaced by the JSON text of its value (a string value keeps
 * its quotes). A path the run does not have is an error: the kernel turns it into a
 * deterministic step failure.
 *
 * svc's one addition: `{{path | text}}` inserts a string, number or bool as its plain text,
 * without JSON quotes (a file name or URL path built from an id); the whole-string form then
 * yields that text as a string. Anything else under `| text` is `template_invalid`.
 *
 * Grammar: `{{` spaces? root ( `.` segment )* spaces? ( `|` spaces? `text` spaces? )? `}}`,
 * root `input` or `steps`, a segment `[A-Za-z0-9_-]+` (a number indexes a list). Every `{{`
 * starts a template.
 */
import { pointerToken } from '../encoding/json-pointer.js';
import { SvcError } from '../errors.js';
import { shortened } from '../encoding/cut-text.js';

/** The context templates read. */
export interface TemplateContext {
  input: unknown;
  steps: Record<string, { output: unknown }>;
}

/** A template that cannot be read: `code` is `template_invalid` (status 422). */
export class TemplateError extends SvcError {
  constructor(message: string, details: { template: string; path?: string }) {
    super('template_invalid', message, details);
    this.name = 'TemplateError';
  }
}

/** One template found in a value. */
export interface TemplateRef {
  /** JSON pointer, relative to the scanned value, of the string holding the template. */
  pointer: string;
  /** The template as written, braces included. */
  template: string;
  /** The path's segments (`["steps", "triage", "output", "amount"]`), or null when malformed. */
  path: string[] | null;
  /** `text` for `{{path | text}}`. */
  filter?: TemplateFilter;
  /** True when the string holds more than this template: it inserts the value's JSON text. */
  embedded?: true;
  /** Why the template is malformed, when it is. */
  error?: string;
}

/** The filters a template may end with: `text` alone (the value's text, without JSON quotes). */
export type TemplateFilter = 'text';

const SEGMENT = /^[A-Za-z0-9_-]+$/;

/**
 * Whether `text` is one template and nothing else: `{{`, no brace, `}}`. It was the regexp
 * `^\{\{\s*([^{}]*?)\s*\}\}$`, the same strings, but its two `\s*` around a lazy group
 * backtrack in cubic time over a run of spaces that no `}}` ends: `{{`, 2,000 spaces, `}}x` took
 * 1.5 s, and a bundle's args are checked at upload and rendered at every lease (docs/design.md,
 * Templates). Two passes of indexOf instead.
 */
export function isWholeTemplate(text: string): boolean {
  if (text.length < 4 || !text.startsWith('{{') || !text.endsWith('}}')) return false;
  const open = text.indexOf('{', 2);
  const close = text.indexOf('}', 2);
  return open === -1 && close === text.length - 2;
}

interface Scanned {
  start: number;
  end: number;
  template: string;
  path: string[] | null;
  filter?: TemplateFilter;
  error?: string;
}

type Parsed = { path: string[] | null; filter?: TemplateFilter; error?: string };

/** A template's inside: a path, and a `| text` after it. */
function parseInner(text: string): Parsed {
  const bar = text.indexOf('|');
  if (bar < 0) return parsePath(text);
  const name = text.slice(bar + 1).trim();
  if (name !== 'text') return { path: null, error: `unknown filter "${shortened(name, 32)}" after "|": the one filter is "text" (the value's text, without JSON quotes)` };
  const parsed = parsePath(text.slice(0, bar));
  return parsed.path ? { path: parsed.path, filter: 'text' } : parsed;
}

function parsePath(text: string): Parsed {
  const body = text.trim();
  if (body === '') return { path: null, error: 'empty template' };
  const segs = body.split('.');
  if (segs.some((s) => !SEGMENT.test(s))) return { path: null, error: `"${body}" is not a path of letters, digits, "_" and "-" separated by dots` };
  if (segs[0] !== 'input' && segs[0] !== 'steps') return { path: null, error: `a template reads "input.…" or "steps.<id>.output.…", not "${segs[0]}"` };
  if (segs[0] === 'steps' && (segs.length < 3 || segs[2] !== 'output')) {
    return { path: null, error: `a steps template reads "steps.<id>.output…", not "${body}"` };
  }
  return { path: segs };
}

function scan(text: string): Scanned[] {
  const out: Scanned[] = [];
  let i = text.indexOf('{{');
  while (i >= 0) {
    const close = text.indexOf('}}', i + 2);
    if (close < 0) {
      out.push({ start: i, end: text.length, template: text.slice(i), path: null, error: 'unclosed template: "{{" without "}}"' });
      break;
    }
    const inner = text.slice(i + 2, close);
    const template = text.slice(i, close + 2);
    const parsed = inner.includes('{{') ? { path: null, error: 'nested "{{" inside a template' } : parseInner(inner);
    out.push({ start: i, end: close + 2, template, ...parsed });
    i = text.indexOf('{{', close + 2);
  }
  return out;
}


/** Every template inside `value` (strings at any depth; object keys are not templates). */
export function templateRefs(value: unknown, base = ''): TemplateRef[] {
  const refs: TemplateRef[] = [];
  const walk = (v: unknown, pointer: string) => {
    if (typeof v === 'string') {
      const found = scan(v);
      const embedded = !(found.length === 1 && isWholeTemplate(v));
      for (const s of found) {
        refs.push({ pointer, template: s.template, path: s.path, ...(s.filter ? { filter: s.filter } : {}), ...(embedded ? { embedded: true as const } : {}), ...(s.error ? { error: s.error } : {}) });
      }
    } else if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, `${pointer}/${i}`));
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) walk(x, `${pointer}/${pointerToken(k)}`);
    }
  };
  walk(value, base);
  return refs;
}

/** Member names short and plain enough to quote in an error: never data such as an email used as a key. */
const PLAIN_MEMBER = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
const MAX_MEMBERS_NAMED = 20;

/**
 * What the value a path stopped at is, for the author who guessed its shape (a sqlite write's
 * one RETURNING row is the output itself, not {rows}): its members when they are few and plain
 * names, else its type. Never a value; a key that is not a plain name names none of them.
 */
function whatItIs(value: unknown): string {
  if (value === null) return ' (it is null)';
  if (typeof value !== 'object') return ` (it is a ${typeof value})`;
  const keys = Object.keys(value);
  if (keys.length === 0) return ' (it is an empty object)';
  if (keys.length > MAX_MEMBERS_NAMED || !keys.every((k) => PLAIN_MEMBER.test(k))) return '';
  return ` (its members: ${keys.join(', ')})`;
}

function resolve(path: string[], ctx: TemplateContext, template: string): unknown {
  let current: unknown = path[0] === 'input' ? ctx.input : ctx.steps;
  for (let i = 1; i < path.length; i++) {
    const seg = path[i]!;
    const here = path.slice(0, i).join('.');
    if (Array.isArray(current)) {
      const idx = /^\d+$/.test(seg) ? Number(seg) : NaN;
      if (!(idx < current.length)) throw new TemplateError(`template ${template}: ${here} has no element ${seg}`, { template, path: path.join('.') });
      current = current[idx];
    } else if (current !== null && typeof current === 'object' && Object.prototype.hasOwnProperty.call(current, seg)) {
      current = (current as Record<string, unknown>)[seg];
    } else {
      const what = i === 1 && path[0] === 'steps' ? `no earlier step "${seg}" has output` : `${here} has no member "${seg}"${whatItIs(current)}`;
      throw new TemplateError(`template ${template}: ${what}`, { template, path: path.join('.') });
    }
  }
  if (current === undefined) throw new TemplateError(`template ${template}: ${path.join('.')} has no value`, { template, path: path.join('.') });
  return current;
}

/**
 * What a template inserts for a path the context has: the value itself, or — for the worker's
 * data boundary — another view of it (the redacted one), chosen after the path was found, so a
 * missing path is an error whatever the view.
 */
export type TemplateView = (path: string[], value: unknown) => unknown;

const itself: TemplateView = (_path, value) => value;

function renderString(text: string, ctx: TemplateContext, view: TemplateView): unknown {
  const found = scan(text);
  if (found.length === 0) return text;
  for (const f of found) if (!f.path) throw new TemplateError(`template ${f.template}: ${f.error}`, { template: f.template });
  const read = (f: Scanned) => {
    const value = view(f.path!, resolve(f.path!, ctx, f.template));
    return f.filter === 'text' ? plainText(value, f) : value;
  };
  if (found.length === 1 && isWholeTemplate(text)) return read(found[0]!);
  let out = '';
  let last = 0;
  for (const f of found) {
    out += text.slice(last, f.start) + (f.filter === 'text' ? (read(f) as string) : JSON.stringify(read(f)));
    last = f.end;
  }
  return out + text.slice(last);
}

/** `| text`: a string as it is, a number or bool as its JSON text; nothing else has one plain text. */
function plainText(value: unknown, f: Scanned): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return JSON.stringify(value);
  const kind = value === null ? 'null' : Array.isArray(value) ? 'a list' : 'an object';
  throw new TemplateError(`template ${f.template}: "| text" needs a string, number or bool, and ${f.path!.join('.')} is ${kind}`, { template: f.template, path: f.path!.join('.') });
}

/**
 * Renders every template in `value` against the run context (decisions 4). Pure; returns a
 * new value. Throws TemplateError for a malformed template or a path the context lacks.
 * `view` picks what a found path inserts (default: its value).
 */
export function renderTemplates(value: unknown, ctx: TemplateContext, view: TemplateView = itself): unknown {
  if (typeof value === 'string') return renderString(value, ctx, view);
  if (Array.isArray(value)) return value.map((v) => renderTemplates(v, ctx, view));
  if (value !== null && typeof value === 'object') {
    // fromEntries defines own properties, so a "__proto__" key stays data.
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderTemplates(v, ctx, view)]));
  }
  return value;
}

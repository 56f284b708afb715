/**
 * JSON schemas of the gateway: the config schema's error wording (the schema is in
 * config-schema.ts, its validator compiled ahead of time in src/validators/compiled/) and the
 * compiler for tool input schemas, which come from operators and from MCP servers (draft-07 or
 * 2020-12).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { linearRegExp } from '../util/linear-regexp.js';
import { withDecimalMultipleOf } from '../util/schema-options.js';
import { ajvErrorPath } from '../encoding/json-pointer.js';
import { schemaMessage } from '../encoding/schema-message.js';
import { didYouMeanMember } from '../util/did-you-mean.js';

export { GATEWAY_CONFIG_SCHEMA, MAX_CANARY_INTERVAL_SECONDS } from './config-schema.js';

/** One line per ajv error: `<json pointer>: <message>`. */
export function formatAjvErrors(errors: readonly ErrorObject[], _doc?: unknown): string[] {
  const out: string[] = [];
  for (const e of errors) {
    const { path, member } = ajvErrorPath(e);
    let where = path || '/';
    const p = e.params as Record<string, unknown>;
    let msg = schemaMessage(e, member === 'extra' ? `is not a known key${didYouMeanMember(e, String(p.additionalProperty))}` : undefined);
    if (e.keyword === 'type' && e.instancePath === '') {
      // The whole file (or section) is a list or a scalar: say what a config is.
      msg = `must be a mapping of keys (key: value lines), not ${Array.isArray(e.data) ? 'a list' : e.data === null ? 'null' : `a ${typeof e.data}`}`;
    } else if (e.keyword === 'pattern') {
      msg = patternWords(e.instancePath, e.data) ?? msg;
    } else if (e.keyword === 'discriminator') {
      msg = 'type must be one of "sqlite", "http", "fs", "mcp"';
      where = `${e.instancePath}/type`;
    }
    const line = `${where}: ${msg}`;
    if (!out.includes(line)) out.push(line);
  }
  return out;
}

/**
 * A config pattern said as what it allows, with the fix for the usual mistake, instead of
 * ajv's regular expression (a sweep wiring an http API wrote allowed_hosts: [127.0.0.1:20481]
 * and got `must match pattern "^(\*\.)?[A-Za-z0-9.-]+$|..."`).
 */
function patternWords(instancePath: string, data: unknown): string | null {
  const value = typeof data === 'string' ? data : '';
  if (/\/allowed_hosts\/\d+$/.test(instancePath)) {
    const base = 'must be a host name alone (api.example.com, *.example.com for its subdomains, 127.0.0.1 or [::1])';
    if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value)) return `${base}, not a URL: write ${hostOf(value) ?? 'the host'} (a call's url carries the scheme)`;
    if (/^[^[\]:]+:\d+$/.test(value) || /^\[[^\]]*\]:\d+$/.test(value)) return `${base}, without a port: write ${value.replace(/:\d+$/, '')} (allowed_hosts does not limit ports; an input_schema pattern on url can)`;
    if (value.includes('/')) return `${base}, without a path: write ${value.split('/')[0]} (an input_schema pattern on url can hold calls to some paths)`;
    return base;
  }
  if (/\/connectors\/\d+\/name$/.test(instancePath)) {
    return 'must start with a lowercase letter, then lowercase letters, digits, _ or - (at most 63 characters): it is the first half of every tool id';
  }
  return null;
}

function hostOf(url: string): string | null {
  try {
    return new URL(url).hostname || null;
  } catch {
    return null;
  }
}

const INPUT_AJV_OPTIONS = { allErrors: true, strict: false, validateFormats: false, code: { regExp: linearRegExp } } as const;
const inputAjv2020 = withDecimalMultipleOf(new Ajv2020(INPUT_AJV_OPTIONS));
const inputAjv07 = withDecimalMultipleOf(new Ajv(INPUT_AJV_OPTIONS));

/**
 * A validator for a tool's input schema, in the dialect its `$schema` names: draft-07 (and
 * the drafts before it that draft-07 reads alike) or 2020-12, the dialect MCP assumes when
 * none is named. Keywords whose shape changed between them (a tuple's `items: [...]`) read as
 * that dialect says; an unnamed schema that only draft-07 can read (what zod-to-json-schema
 * wrote before it named one) is read as draft-07. `$schema` and `$id` are dropped so that
 * every tool's schema compiles on its own.
 */
export function compileInputSchema(schema: Record<string, unknown>): ValidateFunction {
  const { $schema, $id: _id, ...rest } = schema;
  const named = typeof $schema === 'string' ? $schema : '';
  if (/draft-0[4-7]/.test(named)) return inputAjv07.compile(rest);
  if (named !== '') return inputAjv2020.compile(rest);
  try {
    return inputAjv2020.compile(rest);
  } catch (err) {
    try {
      return inputAjv07.compile(rest);
    } catch {
      throw err; // the 2020-12 reading's complaint, the dialect assumed
    }
  }
}

/** The args_invalid details: every failing field. */
export function argsErrors(errors: readonly ErrorObject[] | null | undefined): Array<{ path: string; message: string }> {
  return (errors ?? []).map((e) => {
    return { path: ajvErrorPath(e).path || '/', message: schemaMessage(e) };
  });
}

/**
 * JSON schemas of the gateway: the config schema (one schema, every problem reported, the
 * source of the CONFIGURATION section of man/svc-gateway.5) and the compiler for tool input
 * schemas, which come from operators and from MCP servers (draft-07 or 2020-12).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { linearRegExp } from '../util/linear-regexp.js';
import { withDecimalMultipleOf } from '../util/schema-options.js';
import { ajvErrorPath } from '../encoding/json-pointer.js';
import { schemaMessage } from '../encoding/schema-message.js';
import { didYouMeanMember } from '../util/did-you-mean.js';

const CONTRACT_TYPES = ['string', 'number', 'bool', 'object', 'list'];

const toolSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    description: { type: 'string', description: 'Shown in GET /v1/tools.' },
    writes: { type: 'boolean', description: 'The operation changes the upstream. (Default: false; mcp: not readOnlyHint)' },
    statement: { type: 'string', minLength: 1, description: 'sqlite: the named statement with :param placeholders and :now.' },
    input_schema: { type: 'object', description: 'JSON schema of the arguments. (Default: derived per connector type)' },
    contract: {
      type: 'object',
      additionalProperties: false,
      required: ['required'],
      properties: {
        required: {
          type: 'object',
          description: 'Response field (dotted path) → string, number, bool, object or list.',
          additionalProperties: { enum: CONTRACT_TYPES },
        },
      },
    },
    data_classes: { type: 'object', additionalProperties: { type: 'string' }, description: 'Result field → data class (interface 5.5).' },
  },
};

const common = {
  name: { type: 'string', pattern: '^[a-z][a-z0-9_-]{0,62}$', description: 'Connector name: the first half of every tool id.' },
  tools: { type: 'object', additionalProperties: toolSchema, description: 'Operation → tool settings.' },
  probe: {
    type: 'object',
    additionalProperties: false,
    required: ['tool'],
    properties: { tool: { type: 'string', minLength: 1 }, args: { type: 'object' } },
    description: 'A harmless call the canaries make. (Default: none)',
  },
  timeout_ms: { type: 'integer', minimum: 1, maximum: 600_000, default: 30_000, description: 'Upper bound on one upstream call, ms.' },
};

const stringMap = { type: 'object', additionalProperties: { type: 'string' } };

/** The gateway config schema (interface 2.10 plus svc's own keys). */
/**
 * Longest `canary.interval_seconds`: Node keeps a timer of at most 2^31−1 ms (24.8 days) and
 * runs a longer one after 1 ms, which made a 30-day interval a probe every millisecond.
 */
export const MAX_CANARY_INTERVAL_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

export const GATEWAY_CONFIG_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    listen: { type: 'string', pattern: '^(\\[[^\\]]+\\]|[^:\\s]+):\\d{1,5}$', default: '127.0.0.1:7402', description: 'Listener address HOST:PORT; port 0 picks a free port.' },
    kernel_url: { type: ['string', 'null'], pattern: '^https?://', default: 'http://127.0.0.1:7401', description: 'Kernel address (keys and run events).' },
    token: { type: ['string', 'null'], minLength: 1, default: null, description: 'Bearer token of the listener, also used towards the kernel; null = loopback-only.' },
    data_dir: { type: 'string', minLength: 1, default: './gateway-data', description: 'Idempotency store and repair requests.' },
    test_tools: { type: 'boolean', default: false, description: 'Serve the test.* tools.' },
    canary: {
      type: 'object',
      additionalProperties: false,
      properties: {
        interval_seconds: { type: 'number', exclusiveMinimum: 0, maximum: MAX_CANARY_INTERVAL_SECONDS, default: 60, description: 'Seconds between probes (at most 2147483, 24.8 days).' },
        quarantine_after: { type: 'integer', minimum: 1, default: 2, description: 'Consecutive failed probes that quarantine a connector.' },
        auto_release: { type: 'boolean', default: false, description: 'Release after 2 consecutive passing probes.' },
      },
    },
    connectors: {
      type: 'array',
      default: [],
      items: {
        type: 'object',
        discriminator: { propertyName: 'type' },
        required: ['type'],
        properties: { type: { type: 'string' } },
        oneOf: [
          {
            additionalProperties: false,
            required: ['name', 'type', 'path'],
            properties: { ...common, type: { const: 'sqlite' }, path: { type: 'string', minLength: 1, description: 'The SQLite database file.' } },
          },
          {
            additionalProperties: false,
            required: ['name', 'type', 'allowed_hosts'],
            properties: {
              ...common,
              type: { const: 'http' },
              allowed_hosts: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^(\\*\\.)?[A-Za-z0-9.-]+$|^\\[[0-9a-fA-F:]+\\]$' }, description: 'Hostnames; *.example.com matches subdomains.' },
              headers: { ...stringMap, description: 'Headers added to every request.' },
              max_body_bytes: { type: 'integer', minimum: 1, default: 5242880, description: 'Largest response body kept.' },
            },
          },
          {
            additionalProperties: false,
            // root, or path (interface 2.10 names `path` as a connector's file key): config.ts
            // requires exactly one of them, which a schema could only say with unreadable errors.
            required: ['name', 'type'],
            properties: {
              ...common,
              type: { const: 'fs' },
              root: { type: 'string', minLength: 1, description: 'Directory every path stays under.' },
              path: { type: 'string', minLength: 1, description: 'Another name for root.' },
              max_file_bytes: { type: 'integer', minimum: 1, default: 5242880, description: 'Largest file read returns.' },
            },
          },
          {
            additionalProperties: false,
            required: ['name', 'type', 'command'],
            properties: {
              ...common,
              type: { const: 'mcp' },
              command: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 }, description: 'argv of the stdio server.' },
              env: { ...stringMap, description: 'Extra environment of the server.' },
              cwd: { type: 'string', minLength: 1, description: 'Working directory of the server.' },
            },
          },
        ],
      },
    },
  },
} as const;

let configValidator: ValidateFunction | null = null;

/** The compiled config schema (allErrors: every problem, not the first). */
export function compileConfigSchema(): ValidateFunction {
  configValidator ??= new Ajv({ allErrors: true, discriminator: true, strict: true, strictTypes: false, useDefaults: false, verbose: true }).compile(GATEWAY_CONFIG_SCHEMA);
  return configValidator!;
}

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

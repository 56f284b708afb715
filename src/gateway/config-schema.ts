/**
 * The gateway config schema (interface 2.10 plus svc's own keys): the source of the
 * CONFIGURATION section of man/svc-gateway.5, and of the validator compiled ahead of time into
 * src/validators/compiled/gateway-config.ts (docs/design.md "Validators compiled ahead of
 * time"). Data only: the generator imports it.
 */

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

/**
 * Longest `canary.interval_seconds`: Node keeps a timer of at most 2^31−1 ms (24.8 days) and
 * runs a longer one after 1 ms, which made a 30-day interval a probe every millisecond.
 */
export const MAX_CANARY_INTERVAL_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

/** The gateway config schema (interface 2.10 plus svc's own keys). */
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

/**
 * The JSON Schema of a bundle (decisions 4): one schema for every member, checked with ajv
 * collecting every problem. `x-message` annotations give the message a person should read
 * instead of ajv's generic one. man/svc-bundle.5 documents the same members.
 */

/** `<connector>.<operation>`: the connector as the gateway names connectors, then the operation. */
export const TOOL_ID = '^[a-z][a-z0-9_-]{0,62}\\.[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$';
/** Bundle names (decisions 4). */
export const BUNDLE_NAME = '^[a-z0-9][a-z0-9._-]{0,63}$';
/** Semantic Versioning 2.0.0, the official expression. */
export const SEMVER =
  '^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-((?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\\.(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\\+([0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*))?$';
/** Step ids, prompt names, workflow names. */
export const LOCAL_NAME = '^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$';
const DEPARTMENT = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$';

const forbidden = (message: string) => ({ not: {}, 'x-message': message });

const toolId = { type: 'string', pattern: TOOL_ID, 'x-message': 'must be a tool id <connector>.<operation>' };

const retrySchema = {
  type: 'object',
  additionalProperties: false,
  description: 'Retry of a failed step (decisions 6).',
  properties: {
    max_attempts: { type: 'integer', minimum: 1, maximum: 100, description: 'Attempts before the step is quarantined. (Default: 3)' },
    initial_delay_ms: { type: 'integer', minimum: 0, maximum: 86_400_000, description: 'Delay before the second attempt. (Default: 1000)' },
    max_delay_ms: { type: 'integer', minimum: 0, maximum: 86_400_000, description: 'Cap of the doubling delay. (Default: 60000)' },
  },
};

const stepSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'kind'],
  properties: {
    id: { type: 'string', pattern: LOCAL_NAME, 'x-message': 'must be 1-64 letters, digits, "_" or "-"' },
    kind: { enum: ['model', 'tool', 'action'], 'x-message': 'must be model, tool or action' },
    description: { type: 'string', maxLength: 4096 },
    prompt: { type: 'string', minLength: 1, description: 'model: the name of a prompt in `prompts`.' },
    tools: { type: 'array', maxItems: 256, uniqueItems: true, items: toolId, description: 'model: tools the model may call inside the step.' },
    tool: { ...toolId, description: 'tool, action: the tool the step calls or proposes.' },
    args: { type: 'object', description: 'tool, action: arguments; strings may hold {{templates}}.' },
    output_schema: { type: 'object', description: 'JSON schema the step output must satisfy.' },
    retry: retrySchema,
    timeout_seconds: { type: 'integer', minimum: 1, maximum: 86_400 },
    compensate: {
      type: 'object',
      additionalProperties: false,
      required: ['tool'],
      description: 'tool, action: the call that undoes the step when the run is abandoned.',
      properties: { tool: toolId, args: { type: 'object' } },
    },
  },
  allOf: [
    {
      if: { required: ['kind'], properties: { kind: { const: 'model' } } },
      then: {
        required: ['prompt'],
        properties: {
          tool: forbidden('is for tool and action steps; a model step lists the tools it may call in "tools"'),
          args: forbidden('is for tool and action steps'),
          compensate: forbidden('is for tool and action steps'),
        },
      },
    },
    {
      if: { required: ['kind'], properties: { kind: { enum: ['tool', 'action'] } } },
      then: {
        required: ['tool'],
        properties: {
          prompt: forbidden('is for model steps'),
          tools: forbidden('is for model steps; a tool or action step names its one "tool"'),
        },
      },
    },
  ],
};

const mockScriptSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'What the mock provider answers for one model step.',
  properties: {
    output: { description: 'The step output.' },
    text: { type: 'string', description: 'Free text the model "said".' },
    tool_calls: {
      type: 'array',
      maxItems: 256,
      items: { type: 'object', additionalProperties: false, required: ['tool'], properties: { tool: toolId, args: { type: 'object' } } },
    },
    actions: {
      type: 'array',
      maxItems: 256,
      items: { type: 'object', required: ['tool'], properties: { tool: toolId, args: { type: 'object' }, summary: { type: 'string' } } },
    },
    usage: {
      type: 'object',
      additionalProperties: false,
      properties: { tokens: { type: 'integer', minimum: 0 }, usd: { type: 'number', minimum: 0 } },
    },
    delay_ms: { type: 'integer', minimum: 0, maximum: 600_000 },
    error: {
      type: 'object',
      additionalProperties: false,
      required: ['code'],
      // The bounds of POST /v1/leases/{id}/fail, which reports it.
      properties: { code: { type: 'string', minLength: 1, maxLength: 128 }, message: { type: 'string', maxLength: 65_536 }, deterministic: { type: 'boolean' } },
    },
  },
};

const pacingEntry = {
  type: 'object',
  additionalProperties: false,
  properties: {
    max_concurrent: { type: 'integer', minimum: 1, maximum: 10_000, description: 'Steps of this kind leased at once, per bundle.' },
    min_interval_ms: { type: 'integer', minimum: 0, maximum: 3_600_000, description: 'Least time between two leases of this kind.' },
  },
};

/** JSON Schema of a bundle (decisions 4). */
export const BUNDLE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'version', 'workflows'],
  properties: {
    name: { type: 'string', pattern: BUNDLE_NAME, 'x-message': 'must be 1-64 of a-z, 0-9, ".", "_", "-", starting with a letter or digit' },
    version: { type: 'string', pattern: SEMVER, 'x-message': 'must be a semantic version such as 1.2.0' },
    description: { type: 'string', maxLength: 4096 },
    department: { type: 'string', pattern: DEPARTMENT, 'x-message': 'must be 1-64 letters, digits, ".", "_" or "-"', description: 'Default department of its runs.' },
    systems_of_record: {
      type: 'array',
      maxItems: 256,
      uniqueItems: true,
      items: { type: 'string', pattern: '^[a-z][a-z0-9_-]{0,62}$', 'x-message': 'must be a connector name' },
      description: 'Connectors whose writes are writes to a system of record.',
    },
    tools: {
      type: 'object',
      maxProperties: 1024,
      propertyNames: toolId,
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        properties: { writes: { type: 'boolean' }, description: { type: 'string', maxLength: 4096 } },
        // Said after "must be an object": `billing.refund: writes money` is the usual slip.
        'x-message': '{writes, description}, as in {writes: true, description: "issue a refund"}',
      },
      description: 'Every tool the workflows and mock scripts name; descriptors come from the gateway.',
    },
    prompts: {
      type: 'object',
      maxProperties: 1024,
      propertyNames: { pattern: LOCAL_NAME, 'x-message': 'must be a prompt name of 1-64 letters, digits, "_" or "-"' },
      additionalProperties: { type: 'string', maxLength: 1_000_000 },
    },
    mock: {
      type: 'object',
      maxProperties: 4096,
      propertyNames: { pattern: LOCAL_NAME, 'x-message': 'must be a step id' },
      additionalProperties: mockScriptSchema,
    },
    pacing: {
      type: 'object',
      additionalProperties: false,
      properties: { model: pacingEntry, tool: pacingEntry, action: pacingEntry },
    },
    workflows: {
      type: 'object',
      minProperties: 1,
      maxProperties: 256,
      'x-message': 'must define at least one workflow',
      propertyNames: { pattern: LOCAL_NAME, 'x-message': 'must be a workflow name of 1-64 letters, digits, "_" or "-"' },
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['input_schema', 'steps'],
        properties: {
          description: { type: 'string', maxLength: 4096 },
          department: { type: 'string', pattern: DEPARTMENT, 'x-message': 'must be 1-64 letters, digits, ".", "_" or "-"' },
          input_schema: { type: 'object', description: 'JSON schema (draft-07, or 2020-12 by $schema) of the run input.' },
          steps: { type: 'array', minItems: 1, maxItems: 1000, items: stepSchema, 'x-message': 'must list at least one step' },
        },
      },
    },
  },
} as const;

/**
 * JSON Schemas of the POST /v1/policies and POST /v1/policies/test bodies (decisions §10), and
 * the name and version patterns. Data only: src/validators/compiled/ holds their validators,
 * compiled ahead of time (docs/design.md "Validators compiled ahead of time").
 */
import { MAX_CORPUS_CASES } from './corpus.js';
import { MAX_POLICY_SOURCE } from './parser.js';

/** Policy names: letters, digits, `.`, `_`, `-`; 1–64 characters, starting with a letter or digit. */
export const POLICY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Policy versions: like names, plus `+` (so semver build metadata fits). */
export const POLICY_VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/;

const name = { type: 'string', pattern: POLICY_NAME.source };
const version = { type: 'string', pattern: POLICY_VERSION.source };
const source = { type: 'string', maxLength: MAX_POLICY_SOURCE };

/** JSON Schema of the POST /v1/policies body. */
export const POLICY_POST_SCHEMA = {
  type: 'object',
  required: ['name', 'version', 'source'],
  properties: { name, version, source },
} as const;

/** JSON Schema of the POST /v1/policies/test body. */
export const POLICY_TEST_SCHEMA = {
  type: 'object',
  required: ['policy_a', 'policy_b', 'corpus'],
  properties: {
    policy_a: { type: 'object', required: ['name'], properties: { name, version } },
    policy_b: { type: 'object', properties: { name, version, source } },
    corpus: { type: 'array', maxItems: MAX_CORPUS_CASES, items: { type: 'object' } },
    /** svc's extension: flips carry the conditions that failed (errors_a, errors_b). */
    explain: { type: 'boolean' },
  },
} as const;

/**
 * The validators compiled ahead of time (src/validators/generate.ts, docs/design.md "Validators
 * compiled ahead of time") are what ajv makes of today's schemas: a schema changed without
 * `npm run validators` fails here, naming the file. And a compiled validator judges as
 * ajv.compile of the same schema and options does, errors included.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import { compiledSource, VALIDATOR_MODULES } from '../../src/validators/generate.js';
import { validateRemitMint } from '../../src/validators/compiled/remit-requests.js';
import { validateGatewayConfig } from '../../src/validators/compiled/gateway-config.js';
import { validateBundleShape } from '../../src/validators/compiled/bundle.js';
import { MINT_BODY_SCHEMA } from '../../src/remit/request-schemas.js';
import { GATEWAY_CONFIG_SCHEMA } from '../../src/gateway/config-schema.js';
import { BUNDLE_SCHEMA } from '../../src/bundle/bundle-schema.js';

const ROOT = join(import.meta.dirname, '../..');

describe('validators compiled ahead of time (src/validators/compiled/)', () => {
  it.each(VALIDATOR_MODULES.map((m) => [m.name, m] as const))('%s.ts is what its schemas compile to today (else: npm run validators)', (name, mod) => {
    const file = join(ROOT, 'src/validators/compiled', `${name}.ts`);
    expect(readFileSync(file, 'utf8') === compiledSource(mod), `${file} is stale: run npm run validators`).toBe(true);
  });

  it('every schema is one the meta-schema accepts (the compiled code skips that check at start-up)', () => {
    for (const mod of VALIDATOR_MODULES) {
      const ajv = new Ajv({ ...mod.options });
      for (const keyword of mod.keywords ?? []) ajv.addKeyword({ keyword, schemaType: 'string' });
      for (const [name, schema] of Object.entries(mod.validators)) expect(ajv.validateSchema(schema), `${mod.name}/${name}: ${ajv.errorsText()}`).toBe(true);
    }
  });

  it('judges as ajv.compile does, with the same errors (remit mint, gateway config, bundle)', () => {
    const mintAjv: ValidateFunction = new Ajv({ allErrors: false, coerceTypes: false, useDefaults: false, removeAdditional: false, strict: true }).compile(MINT_BODY_SCHEMA);
    const gatewayAjv: ValidateFunction = new Ajv({ allErrors: true, discriminator: true, strict: true, strictTypes: false, useDefaults: false, verbose: true }).compile(GATEWAY_CONFIG_SCHEMA);
    const bundleAjvInstance = new Ajv({ allErrors: true, verbose: true, strict: true, strictRequired: false, allowUnionTypes: true });
    bundleAjvInstance.addKeyword({ keyword: 'x-message', schemaType: 'string' });
    const bundleAjv: ValidateFunction = bundleAjvInstance.compile(BUNDLE_SCHEMA);
    const cases: Array<[ValidateFunction, ValidateFunction, unknown]> = [
      [mintAjv, validateRemitMint, { tools: ['a.*'], scopes: ['a:*'], spend: { tokens: 1, usd: 1 }, autonomy: 'observe', requested_by: { id: 'a', role: 'b', manager: 'c' } }],
      [mintAjv, validateRemitMint, { tools: ['a.*'], scopes: ['a:*'], spend: { tokens: -1, usd: 1 }, autonomy: 'observe', requested_by: { id: 'a', role: 'b', manager: 'c' } }],
      [mintAjv, validateRemitMint, { tools: 'a.*', grants: ['two words'] }],
      [gatewayAjv, validateGatewayConfig, { connectors: [{ name: 'db', type: 'sqlite', path: '/tmp/x.db' }] }],
      [gatewayAjv, validateGatewayConfig, { listen: 7402, connectors: [{ name: 'Bad Name', type: 'ftp' }, { name: 'web', type: 'http', allowed_hosts: [], base_url: 1 }], extra: true }],
      [bundleAjv, validateBundleShape, { name: 'x', version: '1.0.0', workflows: {} }],
      [bundleAjv, validateBundleShape, { name: 'X Y', version: 'one', workflows: { w: { steps: [{ id: 's', kind: 'tool' }] } }, surplus: 1 }],
    ];
    for (const [reference, compiled, value] of cases) {
      const want = reference(value);
      expect(compiled(value)).toBe(want);
      expect(compiled.errors ?? null).toEqual(reference.errors ?? null);
    }
    // The cases above are not all valid or all invalid, so the comparison can tell.
    expect(cases.map(([reference, , value]) => reference(value))).toContain(false);
    expect(cases.map(([reference, , value]) => reference(value))).toContain(true);
  });
});

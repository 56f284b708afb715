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
import * as kernelConfig from '../../src/validators/compiled/kernel-config.js';
import * as gatewayConfig from '../../src/validators/compiled/gateway-config.js';
import * as remitRequests from '../../src/validators/compiled/remit-requests.js';
import * as policyRequests from '../../src/validators/compiled/policy-requests.js';
import * as bundle from '../../src/validators/compiled/bundle.js';

const ROOT = join(import.meta.dirname, '../..');

const COMPILED: Record<string, ValidateFunction> = { ...kernelConfig, ...gatewayConfig, ...remitRequests, ...policyRequests, ...bundle };
/** Values per validator; SVC_FUZZ_RUNS raises it as in the other property tests (×20). */
const DRAWS = 20 * Number(process.env.SVC_FUZZ_RUNS ?? 30);

/** A small seeded generator (an LCG): a failure names its seed, SVC_FUZZ_SEED replays it. */
function randomSource(seed: number) {
  let state = seed & 0x7fffffff;
  const next = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  return { next, pick };
}

const ODD: readonly unknown[] = [null, 1, -1, 1.5, 'x', '', 'two words', '😀😀', 'a'.repeat(70), true, [], {}, [1, 1], ['a', 'a'], { a: 1 }, 'sqlite', 'http', 'model', 'tool', 'observe', 'NORMAL', 'postgres://x', 'http://k', '127.0.0.1:1', 'a.b', 2 ** 40];
const STRINGS: readonly string[] = ['a', 'a.b', 'db', 'x.y', '1.0.0', 'p@1', 'a b', '😀', 'a'.repeat(300), 'http://x', '127.0.0.1:7401', 'postgres://u@h/db'];

/** A value shaped by `schema` most of the time, with odd values and unknown members mixed in. */
function valueFor(schema: any, r: ReturnType<typeof randomSource>, depth = 0): unknown {
  if (r.next() < 0.01 || depth > 8 || !schema || typeof schema !== 'object') return r.pick(ODD);
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return r.pick(schema.enum);
  if (schema.oneOf && r.next() < 0.8) {
    const branch = r.pick(schema.oneOf) as any;
    return valueFor({ ...schema, ...branch, oneOf: undefined, properties: { ...schema.properties, ...branch.properties }, required: [...(schema.required ?? []), ...(branch.required ?? [])] }, r, depth);
  }
  const type = Array.isArray(schema.type) ? r.pick(schema.type) : schema.type;
  if (type === 'object' || schema.properties || schema.additionalProperties) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(schema.properties ?? {})) if (r.next() < ((schema.required ?? []).includes(k) ? 0.95 : 0.4)) out[k] = valueFor(v, r, depth + 1);
    if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
      for (let i = Math.floor(r.next() * 3); i > 0; i--) out[r.pick(['a', 'w', 'db.q', 'Bad Name', 's1', 'x/y'])] = valueFor(schema.additionalProperties, r, depth + 1);
    }
    if (r.next() < 0.02) out[r.pick(['extra', 'tool', 'path', 'name'])] = r.pick(ODD);
    return out;
  }
  if (type === 'array' || schema.items) return Array.from({ length: Math.floor(r.next() * 3) }, () => valueFor(schema.items, r, depth + 1));
  if (type === 'string') return r.next() < 0.5 ? r.pick(STRINGS) : r.pick(ODD);
  if (type === 'integer' || type === 'number') return r.pick([0, 1, -1, 3.5, 1e16, 2 ** 31]);
  if (type === 'boolean') return r.next() < 0.5;
  return r.pick(ODD);
}

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

  it('answers as ajv.compile does on random values shaped by each schema, errors and all (every validator)', () => {
    const seed = Number(process.env.SVC_FUZZ_SEED ?? Date.now() % 2 ** 31);
    const r = randomSource(seed);
    let invalid = 0;
    let compared = 0;
    for (const mod of VALIDATOR_MODULES) {
      const ajv = new Ajv({ ...mod.options });
      for (const keyword of mod.keywords ?? []) ajv.addKeyword({ keyword, schemaType: 'string' });
      for (const [name, schema] of Object.entries(mod.validators)) {
        const reference = ajv.compile(schema);
        const compiled = COMPILED[name];
        expect(compiled, `${name} is not exported by src/validators/compiled/${mod.name}.ts`).toBeTypeOf('function');
        for (let i = 0; i < DRAWS; i++) {
          const value = valueFor(schema, r);
          const copy = structuredClone(value);
          const want = reference(value);
          const got = compiled!(copy);
          compared++;
          if (!want) invalid++;
          const same = got === want && JSON.stringify(compiled!.errors ?? null) === JSON.stringify(reference.errors ?? null) && JSON.stringify(copy) === JSON.stringify(value);
          expect(same, `seed ${seed} (SVC_FUZZ_SEED=${seed} replays it): ${name} on ${JSON.stringify(value)}`).toBe(true);
        }
      }
    }
    // Both answers drawn, so the comparison could tell a difference.
    expect(invalid).toBeGreaterThan(0);
    expect(invalid).toBeLessThan(compared);
  });
});

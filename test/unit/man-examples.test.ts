/**
 * The examples of the man pages work as printed: the bundle of svc-bundle(5) EXAMPLE validates,
 * the policies of svc-policy(5) EXAMPLES compile (the first is the demo's refunds-v1.policy,
 * and decides as the text after it says), and the gateway config of svc-gateway(5) EXAMPLE
 * loads. A reader copies these; one that drifts from the code fails here first.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { inputTemplatesOutsideSchema, mockScriptNotes, modelStepsWithoutMock, undeclaredTools, validateBundle } from '../../src/bundle/validate.js';
import { loadGatewayConfigFile } from '../../src/gateway/config.js';
import { compilePolicy, lintPolicy } from '../../src/policy/compile.js';
import { normalizeCorpus } from '../../src/policy/corpus.js';
import { decide } from '../../src/policy/decide.js';
import { Redactor } from '../../src/log/logger.js';
import { ROOT, tempDir } from '../helpers/daemon.js';

/** The .EX (or .nf) blocks of a page's section, roff escapes undone, as a reader would copy them. */
function examples(page: string, section: string): string[] {
  const text = readFileSync(join(ROOT, 'man', page), 'utf8');
  const start = text.search(new RegExp(`^\\.SH "?${section}"?$`, 'm'));
  expect(start).toBeGreaterThan(0);
  const end = text.slice(start + 1).search(/^\.SH /m);
  const body = text.slice(start, end < 0 ? undefined : start + 1 + end);
  return [...body.matchAll(/^\.(?:EX|nf)\n([\s\S]*?)^\.(?:EE|fi)$/gm)].map((m) =>
    m[1]!.split('\n').filter((l) => !/^\.(RS|RE|in)\b/.test(l)).join('\n').replace(/\\-/g, '-').replace(/\\e/g, '\\').replace(/\\\(aq/g, "'"),
  );
}

describe('svc-bundle(5) EXAMPLE', () => {
  it('the bundle validates, with no warnings, and the commands after it name real files', () => {
    const [bundle, commands] = examples('svc-bundle.5', 'EXAMPLE');
    const v = validateBundle(parseYaml(bundle!));
    expect(v.ok ? [] : v.problems).toEqual([]);
    const parsed = parseYaml(bundle!);
    expect([...undeclaredTools(parsed), ...modelStepsWithoutMock(parsed), ...inputTemplatesOutsideSchema(parsed), ...mockScriptNotes(parsed)]).toEqual([]);
    for (const file of commands!.match(/fixtures\/\S+/g)!) expect(() => readFileSync(join(ROOT, file))).not.toThrow();
  });
});

describe('svc-policy(5) EXAMPLES', () => {
  const blocks = examples('svc-policy.5', 'EXAMPLES');

  it('the first is fixtures/policies/refunds-v1.policy, rule for rule', () => {
    const fixture = readFileSync(join(ROOT, 'fixtures/policies/refunds-v1.policy'), 'utf8');
    const body = (s: string) => s.split('\n').filter((l) => l.trim() !== '').join('\n');
    // The fixture opens with a header comment the page leaves out; every rule and its comment is there.
    expect(body(fixture).endsWith(body(blocks[0]!))).toBe(true);
  });

  it('each policy compiles without problems', () => {
    for (const source of blocks.slice(0, 2)) expect(lintPolicy(source)).toEqual([]);
  });

  it('decides 180, 0 and "150" as the text says', () => {
    const policy = compilePolicy({ name: 'refunds', version: '1.0.0' }, blocks[0]!);
    const at = (amount: unknown) => {
      const [c] = normalizeCorpus([{ action: { tool: 'billing.refund', args: { amount, invoice_id: 'inv_1001' } } }]);
      const r = decide([policy], c!.action, c!.run);
      return [r.decision, r.rule, r.approver];
    };
    expect(at(180)).toEqual(['approval_required', 'refunds/large_refund', 'role:finance']);
    expect(at(0)).toEqual(['deny', 'refunds/refund_not_positive', null]);
    expect(at('150')[0]).toBe('deny');
  });
});

describe('svc-gateway(5) EXAMPLE', () => {
  it('the config loads, with its ${CRM_TOKEN} set', () => {
    const [config] = examples('svc-gateway.5', 'EXAMPLE');
    const file = join(tempDir(), 'gateway.yaml');
    writeFileSync(file, config!);
    const c = loadGatewayConfigFile(file, { env: { CRM_TOKEN: 'crm-secret' }, redactor: new Redactor() });
    expect(c.connectors.map((x) => [x.name, x.type])).toEqual([['billing', 'sqlite'], ['crm', 'http'], ['files', 'mcp']]);
  });
});

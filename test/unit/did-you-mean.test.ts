/** did-you-mean: the allowed name a misspelt key most likely meant, only when it is close. */
import { describe, expect, it } from 'vitest';
import { closestName, didYouMean, editDistance } from '../../src/util/did-you-mean.js';
import { validateBundle } from '../../src/bundle/validate.js';
import { loadGatewayConfig, GatewayConfigError } from '../../src/gateway/config.js';

describe('editDistance', () => {
  it('counts insertions, deletions, substitutions and a swap of neighbours as one edit each', () => {
    expect(editDistance('statement', 'statement')).toBe(0);
    expect(editDistance('statment', 'statement')).toBe(1);
    expect(editDistance('lisetn', 'listen')).toBe(1);
    expect(editDistance('compensation', 'compensate')).toBe(3);
    expect(editDistance('', 'abc')).toBe(3);
  });
});

describe('closestName', () => {
  const keys = ['listen', 'data_dir', 'token', 'kernel_url', 'connectors'];
  it('names the closest allowed name within a third of the word, ignoring case', () => {
    expect(closestName('lisen', keys)).toBe('listen');
    expect(closestName('Token', keys)).toBe('token');
    expect(closestName('datadir', keys)).toBe('data_dir');
    expect(didYouMean('conectors', keys)).toBe(' (did you mean "connectors"?)');
  });
  it('says nothing when no name is close, for an empty word, or a blob', () => {
    expect(closestName('colour', keys)).toBeNull();
    expect(closestName('', keys)).toBeNull();
    expect(closestName('x'.repeat(65), ['x'.repeat(64)])).toBeNull();
    expect(didYouMean('zz', keys)).toBe('');
  });
  it('takes a tighter bound where a place wants one (svc approvals: one edit)', () => {
    expect(closestName('aprove', ['list', 'approve', 'reject'], 1)).toBe('approve');
    expect(closestName('listtt', ['list', 'approve', 'reject'], 1)).toBeNull();
    expect(closestName('listtt', ['list', 'approve', 'reject'])).toBe('list'); // two edits, a third of six
  });
});

// decisions §10 (every problem at once, at its pointer): an unknown member says what was meant.
describe('unknown members in documents', () => {
  it("a gateway config's misspelt key names the key meant", () => {
    let problems: string[] = [];
    try {
      loadGatewayConfig({ lisen: '127.0.0.1:0', connectors: [{ name: 'db', type: 'sqlite', path: '/tmp/x.db', tools: { q: { statment: 'select 1' } } }] }, { env: {} });
    } catch (err) {
      problems = (err as GatewayConfigError).problems;
    }
    expect(problems).toEqual(['/lisen: is not a known key (did you mean "listen"?)', '/connectors/0/tools/q/statment: is not a known key (did you mean "statement"?)']);
  });
  it("a bundle's misspelt member names the member meant", () => {
    const r = validateBundle({ name: 'b', version: '1.0.0', workflows: { w: { steps: [{ id: 's', kind: 'tool', tool: 't.x', compensation: { tool: 't.y' } }] } } });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.problems).toContainEqual({ path: '/workflows/w/steps/0/compensation', message: 'is not a member of this object (did you mean "compensate"?)' });
  });
});

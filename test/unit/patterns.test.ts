/**
 * Tool and scope patterns (interface 2.1) and pattern coverage for derive (decisions §3),
 * with a fast-check property: coverage is sound (a covered child never matches more).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scopeCovers, scopeMatches, scopePatternProblem, toolCovers, toolMatches, toolPatternProblem, uncoveredScope, uncoveredTool } from '../../src/remit/patterns.js';

describe('matching (I 2.1: exact-or-glob, case sensitive, no regular expressions)', () => {
  it('tool patterns: exact id or <connector>.*', () => {
    expect(toolMatches('billing.refund', 'billing.refund')).toBe(true);
    expect(toolMatches('billing.refund', 'billing.refunds')).toBe(false);
    expect(toolMatches('billing.*', 'billing.refund')).toBe(true);
    expect(toolMatches('billing.*', 'billing.')).toBe(false);
    expect(toolMatches('billing.*', 'billingx.refund')).toBe(false);
    expect(toolMatches('billing.*', 'Billing.refund')).toBe(false);
    expect(toolMatches('Billing.refund', 'billing.refund')).toBe(false);
    expect(toolMatches('billing.re.*', 'billing.refund')).toBe(false); // '.' is not a regex
    expect(toolMatches('*', 'billing.refund')).toBe(false); // not a tool pattern
  });

  it('scope patterns: exact, or a prefix when ending in *', () => {
    expect(scopeMatches('sql:table:invoices', 'sql:table:invoices')).toBe(true);
    expect(scopeMatches('sql:table:invoices', 'sql:table:invoices2')).toBe(false);
    expect(scopeMatches('sql:table:*', 'sql:table:invoices')).toBe(true);
    expect(scopeMatches('sql:table:inv*', 'sql:table:invoices')).toBe(true);
    expect(scopeMatches('sql:*', 'sql:table:invoices')).toBe(true);
    expect(scopeMatches('*', 'anything:at:all')).toBe(true);
    expect(scopeMatches('sql:table:*', 'sql:view:x')).toBe(false);
    expect(scopeMatches('SQL:table:*', 'sql:table:x')).toBe(false);
    expect(scopeMatches('sql:table:.*', 'sql:table:x')).toBe(false);
    expect(scopeMatches('fs:path:/srv/*', 'fs:path:/srv/data')).toBe(true);
    expect(scopeMatches('mcp:files:*', 'mcp:files:*')).toBe(true); // the literal a no-derivation connector needs
    expect(scopeMatches('mcp:files:readme', 'mcp:files:*')).toBe(false);
  });
});

describe('coverage for derive (D §3 "Pattern coverage")', () => {
  it('an exact tool id covers itself only', () => {
    expect(toolCovers('billing.refund', 'billing.refund')).toBe(true);
    expect(toolCovers('billing.refund', 'billing.lookup')).toBe(false);
    expect(toolCovers('billing.refund', 'billing.*')).toBe(false);
  });
  it('c.* covers c.* and every c.<op>, nothing of another connector', () => {
    expect(toolCovers('billing.*', 'billing.*')).toBe(true);
    expect(toolCovers('billing.*', 'billing.refund')).toBe(true);
    expect(toolCovers('billing.*', 'crm.lookup')).toBe(false);
    expect(toolCovers('billing.*', 'crm.*')).toBe(false);
    expect(toolCovers('bill.*', 'billing.*')).toBe(false);
  });
  it('a scope pattern ending in * covers every scope and pattern starting with its prefix', () => {
    expect(scopeCovers('sql:table:*', 'sql:table:invoices')).toBe(true);
    expect(scopeCovers('sql:table:*', 'sql:table:inv*')).toBe(true);
    expect(scopeCovers('sql:table:*', 'sql:table:*')).toBe(true);
    expect(scopeCovers('sql:*', 'sql:table:*')).toBe(true);
    expect(scopeCovers('*', 'http:host:*')).toBe(true);
    expect(scopeCovers('sql:table:inv*', 'sql:table:*')).toBe(false);
    expect(scopeCovers('sql:table:*', 'sql:*')).toBe(false);
    expect(scopeCovers('sql:table:*', 'http:host:a')).toBe(false);
  });
  it('a child `<name>:*`, also the literal that grants a whole connector (I 5.3 step 6), needs a parent that grants that connector too', () => {
    expect(scopeCovers('everything:*', 'everything:*')).toBe(true);
    expect(scopeCovers('*', 'everything:*')).toBe(true);
    expect(scopeCovers('mcp:*', 'everything:*')).toBe(false); // not a prefix of it at all
    expect(scopeCovers('ev*', 'everything:*')).toBe(false); // ev* never grants mcp:everything:*
    expect(scopeCovers('sq*', 'sql:*')).toBe(false); // nor an mcp server named sql
    expect(scopeCovers('sql:*', 'sql:*')).toBe(true);
    expect(scopeCovers('sql:*', 'sql:table:*')).toBe(true); // three parts: a prefix pattern only
    expect(scopeCovers('ev*', 'everything:x:*')).toBe(true);
    // ...and a parent that does grant that connector covers it: `mcp*` grants mcp:mcp:*, the server named mcp.
    expect(scopeCovers('mcp*', 'mcp:*')).toBe(true);
    expect(scopeCovers('m*', 'mcp:*')).toBe(true);
  });
  it('an exact scope covers itself only', () => {
    expect(scopeCovers('sql:table:invoices', 'sql:table:invoices')).toBe(true);
    expect(scopeCovers('sql:table:invoices', 'sql:table:invoices*')).toBe(false);
    expect(scopeCovers('sql:table:invoices', 'sql:table:*')).toBe(false);
  });
  it('lists: the first child no parent covers', () => {
    expect(uncoveredTool(['billing.*', 'crm.lookup'], ['billing.refund', 'crm.lookup'])).toBeNull();
    expect(uncoveredTool(['billing.*', 'crm.lookup'], ['billing.refund', 'crm.export'])).toBe('crm.export');
    expect(uncoveredTool(['billing.*'], [])).toBeNull();
    expect(uncoveredTool([], ['a.b'])).toBe('a.b');
    expect(uncoveredScope(['sql:table:*', 'http:host:a'], ['sql:table:x', 'http:host:a'])).toBeNull();
    expect(uncoveredScope(['sql:table:*'], ['sql:table:x', 'http:host:b'])).toBe('http:host:b');
  });
});

describe('pattern syntax (request validation)', () => {
  it('tool patterns', () => {
    for (const ok of ['billing.refund', 'billing.*', 'mcp_files.read_file', 'a.b.c']) expect(toolPatternProblem(ok), ok).toBeNull();
    for (const bad of ['', '*', 'billing', 'billing.', '.refund', 'billing.re*', '*.refund', 'bill ing.x', 'billing.**', 'a.*.b']) expect(toolPatternProblem(bad), bad).not.toBeNull();
  });
  it('scope patterns', () => {
    for (const ok of ['sql:table:x', 'sql:table:*', '*', 'sql:*', 'sql:table:inv*', 'http:host:api.example.com', 'http:host:[::1]:8080', 'fs:path:/srv/data', 'test:*']) expect(scopePatternProblem(ok), ok).toBeNull();
    for (const bad of ['', 'sql:*:x', 'sql:table:**', 'a b', 'x\n']) expect(scopePatternProblem(bad), JSON.stringify(bad)).not.toBeNull();
    // I 2.1: an exact scope is <system>:<kind>:<key>, none of them empty.
    for (const bad of ['nocolons', 'sql:table', 'sql:table:', ':table:x', 'sql::x', ':sql:table:x']) expect(scopePatternProblem(bad), bad).toMatch(/<system>:<kind>:<key>/);
  });
  it('lengths: a tool pattern of up to 256 characters, a scope pattern of up to 512 (docs/design.md, remit requests)', () => {
    expect(toolPatternProblem('a.' + 'b'.repeat(254))).toBeNull();
    expect(toolPatternProblem('a.' + 'b'.repeat(255))).toMatch(/longer than 256/);
    expect(scopePatternProblem('a:b:' + 'c'.repeat(508))).toBeNull();
    expect(scopePatternProblem('a:b:' + 'c'.repeat(509))).toMatch(/longer than 512/);
    expect(toolPatternProblem('')).toBe('is empty');
    expect(scopePatternProblem('')).toBe('is empty');
  });
});

// Small alphabets so random patterns and ids collide often.
const seg = fc.constantFrom('a', 'b', 'ab', 'ba', 'a.b');
const toolPattern = fc.tuple(seg, fc.oneof(seg, fc.constant('*'))).map(([c, o]) => `${c}.${o}`);
const toolId = fc.tuple(seg, seg).map(([c, o]) => `${c}.${o}`);
const scopeText = fc.array(fc.constantFrom('a', 'b', ':', '*'), { maxLength: 6 }).map((xs) => xs.join(''));
const scopePattern = fc.tuple(scopeText, fc.boolean()).map(([s, glob]) => (glob ? s + '*' : s));

describe('coverage is sound (property, D §3)', () => {
  it('toolCovers(parent, child) ⇒ every id the child matches, the parent matches', () => {
    fc.assert(
      fc.property(toolPattern, toolPattern, fc.array(toolId, { minLength: 1, maxLength: 10 }), (p, c, ids) => {
        if (!toolCovers(p, c)) return;
        for (const id of ids) if (toolMatches(c, id)) expect(toolMatches(p, id)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
  it('scopeCovers(parent, child) ⇒ every scope the child matches, the parent matches', () => {
    fc.assert(
      fc.property(scopePattern, scopePattern, fc.array(scopeText, { minLength: 1, maxLength: 10 }), (p, c, scopes) => {
        if (!scopeCovers(p, c)) return;
        for (const s of [...scopes, c]) if (scopeMatches(c, s)) expect(scopeMatches(p, s)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
  it('every pattern covers itself (derive with the same lists succeeds)', () => {
    fc.assert(fc.property(toolPattern, (p) => toolCovers(p, p)));
    fc.assert(fc.property(scopePattern, (p) => scopeCovers(p, p)));
  });
});

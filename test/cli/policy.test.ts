/**
 * `svc policy` (the built binary) against a live svcd: lint offline like a compiler, push,
 * list, show, and test with the flips table, --json and --fail-on-flip (interface 4.1,
 * decisions 5.1, 5.3, 11). Run `npx tsc -p tsconfig.json` first.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { actionView } from '../../cli/commands/policy.js';
import { runSvc } from '../helpers/cli.js';
import { ROOT, startTestDaemon, tempDir } from '../helpers/daemon.js';

const V1 = join(ROOT, 'fixtures/policies/refunds-v1.policy');
const V2 = join(ROOT, 'fixtures/policies/refunds-v2.policy');
const CORPUS = join(ROOT, 'fixtures/corpora/refunds.json');
const written = JSON.parse(readFileSync(join(ROOT, 'fixtures/corpora/refunds.flips.json'), 'utf8'));

describe('svc policy lint (offline, D 5.1)', () => {
  it('passes the fixtures', async () => {
    for (const file of [V1, V2]) {
      const r = await runSvc(['policy', 'lint', file]);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/no problems/);
    }
  });

  it('prints FILE:LINE:COL: message for every problem and exits 1', async () => {
    const file = join(tempDir(), 'bad.policy');
    writeFileSync(file, ['# broken', 'permit x when true', 'allow y', '  when action.args.amount >', 'deny y when run.remit.grants(1)'].join('\n'));
    const r = await runSvc(['policy', 'lint', file]);
    expect(r.code).toBe(1);
    expect(r.stdout.trim().split('\n')).toEqual([
      `${file}:2:1: unknown effect "permit"; a rule starts with allow, deny or require_approval`,
      `${file}:4:28: unexpected end of the condition`,
      `${file}:5:6: duplicate rule name "y" (first defined at line 3, column 7)`,
      `${file}:5:13: found no matching overload for 'Remit.grants(int)'`,
    ]);
    expect(r.stderr).toMatch(/4 problems/);
    const j = await runSvc(['--json', 'policy', 'lint', file]);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.stdout)).toMatchObject({ ok: false, problems: [{ line: 2, column: 1 }, { line: 4, column: 28 }, {}, {}] });
  });
});

describe('svc policy lint notes on nested loops (D 5.1: such a condition can fail closed; svc-policy(5) item 5)', () => {
  it('notes each rule whose loops nest, with where it stops being evaluated, on stderr; exit 0 and the same in --json', async () => {
    const file = join(tempDir(), 'nested.policy');
    writeFileSync(
      file,
      [
        'deny dup',
        '  when !action.args.items.all(x, action.args.items.exists_one(y, y == x))',
        'allow linear when action.args.orders.all(o, o.lines.all(l, l.qty > 0))',
        'deny cross when action.args.ids.exists(i, !(i in run.input.allowed))',
        'deny words when action.args.words.exists(w, action.summary.contains(w))',
        'allow notes when action.args.lines.exists(l, l.note.lowerAscii().contains("ok"))',
      ].join('\n'),
    );
    const r = await runSvc(['policy', 'lint', file]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(4);
    // y == x also walks x, an element of the outer list, once per pair (two maps: the keys of both); the note names the loops.
    expect(lines[0]!.startsWith(`${file}:2:8: note: rule dup nests loops (action.args.items × action.args.items); past about `)).toBe(true);
    expect(lines[0]).toMatch(/past about [\d,]+ items in each it is not evaluated and fails closed/);
    expect(lines[1]).toContain(':4:17: note: rule cross nests loops (action.args.ids × run.input.allowed)');
    // An in over a path is bounded as if it were a list; svc-policy(5) recommends a map there,
    // which is one lookup, so the note says so (policy authors' sweep, 2026-11-29).
    expect(lines[1]).toMatch(
      /fails closed \(svc-policy\(5\), DECISIONS item 5\); the bound is the product of the two, and "in" walks run\.input\.allowed only when it is a list \(a map there is looked up in one step, and a string or number on its left is not walked\)$/,
    );
    expect(lines[0]).not.toContain('"in" walks');
    // An operation on a value from the data, once per element of another list (session 27).
    expect(lines[2]).toContain(':5:17: note: rule words walks a value inside a loop (action.args.words × the text and lists under action.summary); past about ');
    expect(lines[3]).toBe(`${file}: no problems`);
    const j = await runSvc(['--json', 'policy', 'lint', file]);
    expect(j.code).toBe(0);
    expect(JSON.parse(j.stdout)).toMatchObject({ ok: true, problems: [], notes: [{ line: 2, column: 8 }, { line: 4, column: 17 }, { line: 5, column: 17 }] });
  });
});

describe('svc policy lint notes a \\b that is a backspace (svc-policy(5) CONDITIONS: a pattern in a CEL string)', () => {
  // "\bfoo\b" compiles, but \b in a CEL string is the backspace escape: the deny never matched
  // "a foo b" in a policy author's corpus (sweep of 2026-11-29). A note, not a problem: exit 0.
  it('notes the rule whose literal pattern holds a backspace, and not one written raw or with \\\\b', async () => {
    const file = join(tempDir(), 'boundary.policy');
    writeFileSync(
      file,
      ['deny word when action.summary.matches("\\bfoo\\b")', 'allow raw when action.summary.matches(r"\\bok\\b")', 'allow doubled when action.summary.matches("\\\\bok\\\\b")'].join('\n'),
    );
    const r = await runSvc(['policy', 'lint', file]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(
      `${file}:1:16: note: rule word matches a pattern that holds a backspace, which \\b is in a CEL string: for RE2's word boundary write "\\\\b" or r"\\b" (svc-policy(5) CONDITIONS)\n${file}: no problems\n`,
    );
    expect(r.stdout).toBe('');
  });
});

describe('svc policy push, list, show against svcd (I 4.1)', () => {
  it('policy test --b NAME that is also a file in the working directory is refused as ambiguous (svc(1))', async () => {
    // README.md is a valid policy name and a file where the CLI runs (the repository root).
    const r = await runSvc(['policy', 'test', join(ROOT, 'fixtures/corpora/refunds.json'), '--a', 'refunds', '--b', 'README.md', '--kernel-url', 'http://127.0.0.1:2']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('svc: --b README.md is both a file here and a policy name: write ./README.md for the file, or README.md@VERSION for the stored policy\n');
  });

  it('policy test --a FILE is refused with the push that makes it a name (I 4.1: policy_a is {name, version})', async () => {
    const file = 'fixtures/policies/refunds-v1.policy';
    const r = await runSvc(['policy', 'test', join(ROOT, 'fixtures/corpora/refunds.json'), '--a', file, '--b', 'refunds@2.0.0', '--kernel-url', 'http://127.0.0.1:2']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`svc: --a names a pushed policy (NAME or NAME@VERSION), not a file: push ${file} first (svc policy push ${file} --name NAME --version VERSION); --b may be a file\n`);
  });

  it('pushes versions, lists them and shows the latest or an exact version', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    const p1 = await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    expect(p1.code).toBe(0);
    expect(p1.stdout).toMatch(/^created: refunds@1\.0\.0 pol_[0-9A-Z]{26}$/m);
    const again = await runSvc([...url, '--json', 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    expect(JSON.parse(again.stdout)).toMatchObject({ status: 'exists', name: 'refunds', version: '1.0.0' });
    await runSvc([...url, 'policy', 'push', V2, '--name', 'refunds', '--version', '2.0.0']);

    const list = await runSvc([...url, 'policy', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^NAME\s+VERSION\s+POLICY_ID\s+CREATED\nrefunds\s+1\.0\.0\s+pol_\S+\s+\S+\nrefunds\s+2\.0\.0/);

    const latest = await runSvc([...url, 'policy', 'show', 'refunds']);
    expect(latest.stdout).toMatch(/^# refunds@2\.0\.0 \(pol_/);
    expect(latest.stdout).toContain(readFileSync(V2, 'utf8'));
    const exact = await runSvc([...url, '--json', 'policy', 'show', 'refunds@1.0.0']);
    expect(JSON.parse(exact.stdout)).toMatchObject({ name: 'refunds', version: '1.0.0', source: readFileSync(V1, 'utf8') });
  });

  it('reports refusals: other source for a version, a source that does not compile, unknown names', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    const conflict = await runSvc([...url, 'policy', 'push', V2, '--name', 'refunds', '--version', '1.0.0']);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toMatch(/policy_version_exists/);

    const file = join(tempDir(), 'bad.policy');
    writeFileSync(file, 'allow ok when true\ndeny no when action.nope');
    const invalid = await runSvc([...url, 'policy', 'push', file, '--name', 'x', '--version', '1']);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain(`${file}:2:21: action has no member "nope" (its members: tool,`);

    // svc(1) DESCRIPTION: a source's comments reach the terminal as text, not as escape
    // sequences or bidi reordering; --json has the source exactly as stored.
    const trojan = join(tempDir(), 'trojan.policy');
    const source = '# \u001b[2J\u001b]52;c;ZXZpbA==\u0007 cleared \u202eevil\u202c\r\nallow all\r# looks like a comment\n  when true\n';
    writeFileSync(trojan, source);
    expect((await runSvc([...url, 'policy', 'push', trojan, '--name', 'trojan', '--version', '1'])).code).toBe(0);
    const shown = await runSvc([...url, 'policy', 'show', 'trojan']);
    expect(shown.code).toBe(0);
    expect(shown.stdout).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\p{Cf}]/u);
    expect(shown.stdout).toContain('# ?[2J?]52;c;ZXZpbA==? cleared \\u{202e}evil\\u{202c}\r\nallow all?# looks like a comment\n');
    expect(JSON.parse((await runSvc([...url, '--json', 'policy', 'show', 'trojan'])).stdout).source).toBe(source);

    const unknown = await runSvc([...url, 'policy', 'show', 'ghost']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/not_found/);

    const usage = await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds']);
    expect(usage.code).toBe(2);
  });
});

describe('the flips table\'s ACTION column', () => {
  it('shows the summary when the action has one, else the tool and its args, cut to the width', () => {
    expect(actionView({ action: { tool: 'billing.refund', args: { invoice_id: 'inv_1', amount: 150 }, summary: '  refund 150\n on inv_1 ' } })).toBe('billing.refund: refund 150 on inv_1');
    expect(actionView({ action: { tool: 'billing.refund', args: { amount: 150 }, summary: '' } })).toBe('billing.refund {"amount":150}');
    expect(actionView({ action: { tool: 'billing.refund', args: { amount: 150 }, summary: 7 } })).toBe('billing.refund {"amount":150}');
    expect(actionView({ action: { tool: 'crm.export', summary: 'x'.repeat(100) } }, 20)).toBe('crm.export: xxxxxxx…');
    expect(actionView({})).toBe('? {}');
  });
});

describe('svc policy test (D 5.3)', () => {
  it('prints a table of flips with both rules and the action; --json gives the flips', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    await runSvc([...url, 'policy', 'push', V2, '--name', 'refunds', '--version', '2.0.0']);

    const r = await runSvc([...url, 'policy', 'test', CORPUS, '--a', 'refunds@1.0.0', '--b', 'refunds@2.0.0']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^INDEX\s+A → B\s+RULE A\s+RULE B\s+ACTION$/);
    expect(lines).toHaveLength(1 + written.flips.length + 2);
    // The action as its summary says it (D 5.1), not its args' leading ids.
    expect(lines[1]).toMatch(/^2\s+approval_required → allow\s+refunds\/large_refund\s+refunds\/small_refund\s+billing\.refund: refund 100\.01 on inv_1001$/);
    expect(lines.at(-1)).toBe(`${written.flips.length} flips in ${written.cases} cases: A = refunds@1.0.0, B = refunds@2.0.0`);
    for (const f of written.flips) expect(r.stdout).toMatch(new RegExp(`^${f.index}\\s+${f.a} → ${f.b}\\s+${f.rule_a.replace('/', '\\/')}\\s+${f.rule_b.replace('/', '\\/')}\\s`, 'm'));

    const j = await runSvc([...url, '--json', 'policy', 'test', CORPUS, '--a', 'refunds@1.0.0', '--b', 'refunds@2.0.0']);
    expect(j.code).toBe(0);
    expect(JSON.parse(j.stdout)).toMatchObject({ cases: written.cases, flips: written.flips });
    // `svc policy diff` is the same command (the policy diff over a corpus).
    const diff = await runSvc([...url, '--json', 'policy', 'diff', CORPUS, '--a', 'refunds@1.0.0', '--b', 'refunds@2.0.0']);
    expect(diff.code).toBe(0);
    expect(JSON.parse(diff.stdout)).toEqual(JSON.parse(j.stdout));
  });

  it('lists the cases whose approver changed under B after the flips, and counts them (svc(1))', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    const dir = tempDir();
    const a = join(dir, 'a.policy');
    const b = join(dir, 'b.policy');
    writeFileSync(a, 'require_approval big by "role:finance" when action.args.amount > 100\nallow rest when true\n');
    writeFileSync(b, 'require_approval huge by "role:cfo" when action.args.amount > 1000\nallow rest when action.args.amount <= 1000\n');
    await runSvc([...url, 'policy', 'push', a, '--name', 'routing', '--version', '1']);
    const corpus = join(dir, 'corpus.json');
    writeFileSync(corpus, JSON.stringify({ corpus: [500, 5000].map((amount) => ({ action: { tool: 'billing.refund', args: { amount }, summary: `refund ${amount}` } })) }));
    const r = await runSvc([...url, 'policy', 'test', corpus, '--a', 'routing@1', '--b', b]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^INDEX\s+A → B\s+RULE A\s+RULE B\s+ACTION$/);
    expect(lines[1]).toMatch(/^0\s+approval_required → allow\s+routing\/big\s+/);
    expect(lines).toContain('approval_required under both, another approver:');
    expect(r.stdout).toMatch(/^INDEX\s+APPROVER A → B\s+RULE A\s+RULE B\s+ACTION\n1\s+role:finance → role:cfo\s+routing\/big\s+routing\/huge\s+billing\.refund: refund 5000$/m);
    expect(lines.at(-1)).toBe(`1 flip in 2 cases; 1 case with another approver: A = routing@1, B = routing (source)`);
    const j = JSON.parse((await runSvc([...url, '--json', 'policy', 'test', corpus, '--a', 'routing@1', '--b', b])).stdout);
    expect(j.approver_changes).toEqual([{ index: 1, a: 'role:finance', b: 'role:cfo', rule_a: 'routing/big', rule_b: 'routing/huge' }]);
  });

  // Unknown members of a kernel body are ignored (docs/design.md), so a corpus case with
  // `arg` for `args` was decided with args {} and flipped nothing, silently: the one tool
  // meant to catch a policy change then passed it. Warned of with its pointer in the file.
  it('warns of a case member the kernel does not read (arg for args, inputs for input), and still tests', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    const file = join(tempDir(), 'typos.json');
    writeFileSync(file, JSON.stringify({ corpus: [
      { note: 'a comment member of the case is the author\'s own', action: { tool: 'billing.refund', args: { amount: 5, whatever: 1 } } },
      { action: { tool: 'billing.refund', arg: { amount: 500 } }, run: { inputs: {}, remit: { grants: ['pii'], autonomy: 'observe', scope: [] }, usage: { dollars: 1 } } },
    ] }));
    const r = await runSvc([...url, 'policy', 'test', file, '--a', 'refunds@1.0.0', '--b', V2]);
    expect(r.code).toBe(0);
    expect(r.stderr.trim().split('\n')).toEqual([
      `${file}: /corpus/1/action/arg: warning: "arg" is not a member of an action (its members: tool, connector, operation, args, writes, system_of_record, summary); the case is decided without it`,
      `${file}: /corpus/1/run/inputs: warning: "inputs" is not a member of a run (its members: id, bundle, workflow, department, requested_by, input, usage, remit); the case is decided without it`,
      `${file}: /corpus/1/run/usage/dollars: warning: "dollars" is not a member of usage (its members: tokens, usd); the case is decided without it`,
      `${file}: /corpus/1/run/remit/scope: warning: "scope" is not a member of a remit (its members: autonomy, tools, scopes, grants); the case is decided without it`,
    ]);
    // The fixture corpus has none.
    const clean = await runSvc([...url, 'policy', 'test', CORPUS, '--a', 'refunds@1.0.0', '--b', V2]);
    expect(clean.stderr).not.toContain('warning');
  });

  it('a bad case in a corpus sent in slices is named at its index in the whole file (svc(1))', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    const cases: unknown[] = Array.from({ length: 12_000 }, (_, i) => ({ action: { tool: 'billing.refund', args: { amount: i, note: 'x'.repeat(150) } }, run: { department: 'support' } }));
    cases[11_000] = { action: { tool: 5 } };
    const file = join(tempDir(), 'big.json');
    writeFileSync(file, JSON.stringify(cases));
    const r = await runSvc([...url, 'policy', 'test', file, '--a', 'refunds@1.0.0', '--b', V1]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^svc: request_invalid: \/corpus\/11000\/action\/tool /);
  });

  // D 5.1 item 4: a condition that fails counts as matched for require_approval. A policy
  // whose rule reads action.args.invoiceid (for invoice_id) flips every refund to approval,
  // and the table showed only the rule, as if the policy meant it.
  it('names the conditions that failed closed in the flipped cases, with their cases', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    const typo = join(tempDir(), 'typo.policy');
    writeFileSync(typo, readFileSync(V1, 'utf8') + '\nrequire_approval odd_invoice by "role:finance"\n  when action.tool == "billing.refund" && action.args.invoiceid == "inv_9"\n');
    const r = await runSvc([...url, 'policy', 'test', CORPUS, '--a', 'refunds@1.0.0', '--b', typo]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('conditions that failed in these cases (failing closed, they count as matched for deny and require_approval, and not for allow):\n  B  refunds/odd_invoice: No such key: invoiceid (cases ');
    const j = JSON.parse((await runSvc([...url, '--json', 'policy', 'test', CORPUS, '--a', 'refunds@1.0.0', '--b', typo])).stdout);
    expect(j.flips.length).toBeGreaterThan(0);
    for (const f of j.flips) expect(f.errors_b).toEqual([{ rule: 'refunds/odd_invoice', message: 'No such key: invoiceid' }]);
    // Versions that evaluate cleanly print no such section.
    const clean = await runSvc([...url, 'policy', 'test', CORPUS, '--a', 'refunds@1.0.0', '--b', V2]);
    expect(clean.stdout).not.toContain('conditions that failed');
  });

  it('takes B from a policy file; --fail-on-flip exits 1 on flips and 0 without', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    const file = await runSvc([...url, '--json', 'policy', 'test', CORPUS, '--a', 'refunds', '--b', V2, '--fail-on-flip']);
    expect(file.code).toBe(1);
    expect(JSON.parse(file.stdout).flips).toEqual(written.flips);
    expect(file.stderr).toMatch(/9 flips \(--fail-on-flip\)/);

    // A --b that looks like a file and is not there is said to be missing, not a bad name.
    const typo = await runSvc([...url, 'policy', 'test', CORPUS, '--a', 'refunds', '--b', './typo.policy']);
    expect(typo.code).toBe(1);
    expect(typo.stderr.trim()).toBe('svc: cannot read ./typo.policy: no such file');

    const same = await runSvc([...url, 'policy', 'test', CORPUS, '--a', 'refunds@1.0.0', '--b', V1, '--fail-on-flip']);
    expect(same.code).toBe(0);
    expect(same.stdout.trim()).toBe(`0 flips in ${written.cases} cases: A = refunds@1.0.0, B = refunds (source)`);

    const badB = join(tempDir(), 'bad.policy');
    writeFileSync(badB, 'allow a when');
    const invalid = await runSvc([...url, 'policy', 'test', CORPUS, '--a', 'refunds', '--b', badB]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain(`${badB}:1:13: expected a condition after "when"`);

    const usage = await runSvc([...url, 'policy', 'test', CORPUS, '--a', 'refunds@', '--b', V1]);
    expect(usage.code).toBe(2);
  });

  it('sends a corpus over the 1 MiB body limit in slices and numbers the flips across them (D §10)', async () => {
    await using d = await startTestDaemon();
    const url = ['--kernel-url', d.kernelUrl!];
    await runSvc([...url, 'policy', 'push', V1, '--name', 'refunds', '--version', '1.0.0']);
    await runSvc([...url, 'policy', 'push', V2, '--name', 'refunds', '--version', '2.0.0']);
    const cases = JSON.parse(readFileSync(CORPUS, 'utf8')) as Array<{ action: { args: Record<string, unknown> } }>;
    const copies = 25;
    const big = Array.from({ length: copies }, () => cases.map((c) => ({ ...c, action: { ...c.action, args: { ...c.action.args, memo: 'm'.repeat(2000) } } }))).flat();
    const file = join(tempDir(), 'big.json');
    writeFileSync(file, JSON.stringify(big));
    expect(readFileSync(file).length).toBeGreaterThan(1024 * 1024);
    const r = await runSvc([...url, '--json', 'policy', 'test', file, '--a', 'refunds@1.0.0', '--b', 'refunds@2.0.0']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.cases).toBe(big.length);
    const expected = Array.from({ length: copies }, (_, i) => written.flips.map((f: { index: number }) => ({ ...f, index: f.index + i * cases.length }))).flat();
    expect(out.flips).toEqual(expected);
  });
});

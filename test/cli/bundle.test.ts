/**
 * `svc bundle` (the built binary) against a live svcd: validate offline with every problem's
 * JSON pointer, sign (YAML in, {bundle, signature} out), push, list, show (interface 4.1
 * rule 1, decisions 4, 11). Run `npx tsc -p tsconfig.json` first.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { bundleId } from '../../src/bundle/sign.js';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import { verifyBytes } from '../../src/keys/ed25519.js';
import { NO_DAEMON, runSvc } from '../helpers/cli.js';
import { ROOT, startTestDaemon, tempDir } from '../helpers/daemon.js';

const BUNDLE = join(ROOT, 'fixtures/bundles/refunds.yaml');
const KEY = join(ROOT, 'fixtures/keys/demo-publisher.json');
const demo = JSON.parse(readFileSync(KEY, 'utf8'));
const refunds = parse(readFileSync(BUNDLE, 'utf8'));
const daemon = () => startTestDaemon({ kernel: { publishers: [`${demo.key_id}:${demo.public_key}`] } });

function badBundleFile(): string {
  const b = structuredClone(refunds);
  b.version = 'v1';
  b.workflows.refund.steps[2].tool = 'billing.unknown';
  b.workflows.refund.steps.push({ id: 'lookup', kind: 'tool', tool: 'billing.lookup_invoice' });
  const file = join(tempDir(), 'bad.yaml');
  writeFileSync(file, JSON.stringify(b));
  return file;
}

describe('svc bundle validate (offline, D 4)', () => {
  it('accepts the refunds fixture', async () => {
    const r = await runSvc(['bundle', 'validate', BUNDLE]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`${BUNDLE}: valid bundle refunds 1.0.0 (${bundleId(refunds)})`);
  });

  it('lists every problem with its JSON pointer and exits 1', async () => {
    const file = badBundleFile();
    const r = await runSvc(['bundle', 'validate', file]);
    expect(r.code).toBe(1);
    expect(r.stdout.trim().split('\n')).toEqual([
      `${file}: /version: must be a semantic version such as 1.2.0`,
      `${file}: /workflows/refund/steps/3/id: duplicate step id "lookup" (also step 0)`,
    ]);
    expect(r.stderr).toMatch(/2 problems/);
    // An undeclared tool is a warning, not a problem (D 4's own sample has some).
    expect(r.stderr).toContain(`${file}: /workflows/refund/steps/2/tool: warning: tool "billing.unknown" is not declared in the bundle's tools`);
    const j = await runSvc(['--json', 'bundle', 'validate', file]);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.stdout)).toMatchObject({ ok: false, problems: [{ path: '/version' }, {}], warnings: [{ path: '/workflows/refund/steps/2/tool' }] });
  });

  it('warns of an {{input.…}} template the workflow\'s input_schema forbids, in a step or a prompt it uses (every run would fail with template_invalid)', async () => {
    const b = structuredClone(refunds);
    b.workflows.refund.steps[0].args.invoice_id = '{{input.invoce_id}}';
    b.prompts.triage = b.prompts.triage.replace('{{input.message}}', '{{input.mesage}}');
    const file = join(tempDir(), 'typo.yaml');
    writeFileSync(file, JSON.stringify(b));
    const r = await runSvc(['bundle', 'validate', file]);
    expect(r.code).toBe(0); // a note, not a problem
    const members = 'its members: ticket_id, customer_id, invoice_id, message';
    expect(r.stderr).toContain(`${file}: /workflows/refund/steps/0/args/invoice_id: warning: {{input.invoce_id}} names input.invoce_id, which workflow "refund"'s input_schema does not allow (${members}); every run would fail with template_invalid`);
    expect(r.stderr).toContain(`${file}: /prompts/triage: warning: {{input.mesage}} names input.mesage`);
    // The fixture as it is has no such note; nor does a schema that lets other members in.
    expect((await runSvc(['bundle', 'validate', BUNDLE])).stderr).not.toContain('input_schema does not allow');
    delete b.workflows.refund.input_schema.additionalProperties;
    writeFileSync(file, JSON.stringify(b));
    expect((await runSvc(['bundle', 'validate', file])).stderr).not.toContain('input_schema does not allow');
  });

  it('warns of a mock script that would not play as meant: for a tool step, a tool call the step does not offer, an output its schema refuses (svc-bundle(5) VALIDATION)', async () => {
    const b = structuredClone(refunds);
    b.mock.lookup = { output: { id: 'inv_1' } };
    b.mock.triage.tool_calls.push({ tool: 'billing.refund', args: {} });
    b.mock.triage.output.category = 'refnd';
    const file = join(tempDir(), 'mock.yaml');
    writeFileSync(file, JSON.stringify(b));
    const r = await runSvc(['bundle', 'validate', file]);
    expect(r.code).toBe(0); // notes, not problems
    expect(r.stderr).toContain(`${file}: /mock/lookup: warning: step "lookup" is a tool step: the mock provider answers model steps only (a tool or action step calls the gateway), so this script is never played`);
    expect(r.stderr).toContain(`${file}: /mock/triage/tool_calls/1/tool: warning: tool "billing.refund" is not among the tools step "triage" of workflow "refund" offers (its tools: billing.lookup_invoice): the worker answers this call with tool_not_offered, as it would a real model's; add the tool to the step's tools`);
    expect(r.stderr).toContain(`${file}: /mock/triage/output: warning: this output does not match the output_schema of step "triage" of workflow "refund" (/category must be one of "refund", "other"): under the mock provider every run would fail with output_invalid`);
    expect((await runSvc(['bundle', 'validate', BUNDLE])).stderr).not.toContain('warning');
  });

  // svc(1): push checks the bundle "as by svc bundle validate"; sign validates first. Both
  // used to drop validate's warnings, so a {{input.typo}} that fails every run was signed
  // and pushed without a word.
  it('sign and push print the warnings validate prints, on standard error, and still succeed', async () => {
    const b = structuredClone(refunds);
    b.version = '1.0.7';
    b.workflows.refund.steps[0].args.invoice_id = '{{input.invoce_id}}';
    b.workflows.refund.steps[2].tool = 'billing.refnd';
    const file = join(tempDir(), 'warned.yaml');
    writeFileSync(file, JSON.stringify(b));
    const typo = `${file}: /workflows/refund/steps/0/args/invoice_id: warning: {{input.invoce_id}} names input.invoce_id`;
    const undeclared = `${file}: /workflows/refund/steps/2/tool: warning: tool "billing.refnd" is not declared in the bundle's tools`;
    const sign = await runSvc(['bundle', 'sign', file, '--key', KEY, '-o', join(tempDir(), 'warned.json')]);
    expect(sign.code).toBe(0);
    expect(sign.stderr).toContain(typo);
    expect(sign.stderr).toContain(undeclared);
    await using d = await daemon();
    const push = await runSvc(['--kernel-url', d.kernelUrl!, 'bundle', 'push', file, '--key', KEY]);
    expect(push.code).toBe(0);
    expect(push.stdout.trim()).toBe(`created: refunds 1.0.7 ${bundleId(b)}`);
    expect(push.stderr).toContain(typo);
    expect(push.stderr).toContain(undeclared);
    // The fixture has none.
    const clean = await runSvc(['--kernel-url', d.kernelUrl!, 'bundle', 'push', BUNDLE, '--key', KEY]);
    expect(clean.stderr).not.toContain('warning');
  });

  it('says which file it cannot read or parse', async () => {
    const missing = await runSvc(['bundle', 'validate', '/nonexistent/x.yaml']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot read \/nonexistent\/x\.yaml/);
    const file = join(tempDir(), 'broken.yaml');
    writeFileSync(file, 'name: [unclosed');
    // validate lists a file that does not parse as its one problem, like any other (and as JSON with --json)
    const broken = await runSvc(['bundle', 'validate', file]);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: /: not valid YAML or JSON: .+\n$`));
    expect(broken.stderr).toBe(`svc: 1 problem in ${file}\n`);
    const json = await runSvc(['--json', 'bundle', 'validate', file]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({ ok: false, file, problems: [{ path: '', message: expect.stringMatching(/^not valid YAML or JSON: /) }], warnings: [] });
    writeFileSync(file, '{{{\n');
    const flow = await runSvc(['bundle', 'validate', file]);
    expect(flow.stdout).toMatch(/: not valid YAML or JSON: .* at line 2, column 1\n$/); // one whole line, no dangling ':'
    // the other commands refuse such a file on stderr
    const sign = await runSvc(['bundle', 'sign', file, '--key', file]);
    expect(sign.code).toBe(1);
    expect(sign.stderr).toMatch(/is not valid YAML or JSON: .* at line 2, column 1\n$/);
  });
});

describe('svc bundle validate / sign: numbers JSON cannot carry as written (D 1 JCS, svc(1) bundle validate)', () => {
  it('a .nan, .inf, or an integer a double would change or cannot hold is a problem at its pointer, never rounded into what is signed', async () => {
    const file = join(tempDir(), 'numbers.yaml');
    const write = (v: string) =>
      writeFileSync(file, `name: numbers\nversion: 1.0.0\nworkflows:\n  w:\n    input_schema: {type: object}\n    steps: [{id: a, kind: tool, tool: x.y, args: {ok: 9007199254740991, v: ${v}}}]\n`);
    for (const [v, message] of [
      ['"a \\ud800 b"', 'the string holds a lone surrogate (\\ud800 to \\udfff without its pair), which canonical JSON cannot carry'],
      ['.nan', 'NaN is not a number JSON can carry'],
      ['-.inf', '-Infinity is not a number JSON can carry'],
      ['12345678901234567890', 'the integer 12345678901234567890 is past what a JSON number holds exactly (it would be signed as 12345678901234567000); quote it to keep it as text'],
    ]) {
      write(v);
      const r = await runSvc(['bundle', 'validate', file]);
      expect([r.code, r.stdout], v).toEqual([1, `${file}: /workflows/w/steps/0/args/v: ${message}\n`]);
      const sign = await runSvc(['bundle', 'sign', file, '--key', KEY]);
      expect([sign.code, sign.stdout, sign.stderr], v).toEqual([1, '', `svc: ${file}: /workflows/w/steps/0/args/v: ${message}\n`]);
    }
    // A member name with a lone surrogate, likewise.
    writeFileSync(file, `name: numbers\nversion: 1.0.0\nworkflows:\n  w:\n    input_schema: {type: object}\n    steps: [{id: a, kind: tool, tool: x.y, args: {"k\\ud800": 1}}]\n`);
    const member = await runSvc(['bundle', 'validate', file]);
    expect([member.code, member.stdout]).toEqual([1, `${file}: /workflows/w/steps/0/args/k\ufffd: the member name holds a lone surrogate (\\ud800 to \\udfff without its pair), which canonical JSON cannot carry\n`]);
    // Past a double's range altogether (it would be signed as null).
    write('1' + '0'.repeat(400));
    const huge = await runSvc(['bundle', 'validate', file]);
    expect([huge.code, huge.stdout]).toEqual([1, `${file}: /workflows/w/steps/0/args/v: the integer 10000000000000000000…0000000000 (401 digits) is out of range for a JSON number\n`]);
    // Every problem at once (svc(1)): such numbers beside the bundle's other problems.
    writeFileSync(file, `name: Bad Name\nversion: 1.0.0\nworkflows:\n  w:\n    input_schema: {type: object}\n    steps: [{id: a, kind: tool, tool: x.y, args: {n: 9007199254740993, f: .nan, t: "{{steps.zz.output.x}}"}}]\n`);
    const all = await runSvc(['bundle', 'validate', file]);
    expect(all.code).toBe(1);
    const lines = all.stdout.trim().split('\n');
    expect(lines).toEqual(expect.arrayContaining([expect.stringContaining('/workflows/w/steps/0/args/n: the integer 9007199254740993'), expect.stringContaining('/workflows/w/steps/0/args/f: NaN is not a number'), expect.stringContaining(': /name: ')]));
    expect(lines.some((l) => l.includes('/args/t'))).toBe(true);
    // The stand-in for such a value adds nothing of its own (a retry's .inf is not "must be >= 1"),
    // and in a signed document the pointers are the bundle's, as the validator's.
    writeFileSync(file, `name: numbers\nversion: 1.0.0\nworkflows:\n  w:\n    input_schema: {type: object}\n    steps: [{id: a, kind: tool, tool: x.y, retry: {max_attempts: .inf}}]\n`);
    const inf = await runSvc(['bundle', 'validate', file]);
    expect(inf.stdout).toBe(`${file}: /workflows/w/steps/0/retry/max_attempts: Infinity is not a number JSON can carry\n`);
    const doc = join(tempDir(), 'signed.yaml');
    writeFileSync(doc, `bundle:\n  name: Bad Name\n  version: 1.0.0\n  workflows:\n    w:\n      input_schema: {type: object}\n      steps: [{id: a, kind: tool, tool: x.y, args: {v: .nan}}]\nsignature: {key_id: k, signature: s}\n`);
    const signedLines = (await runSvc(['bundle', 'validate', doc])).stdout.trim().split('\n');
    expect(signedLines).toEqual(expect.arrayContaining([`${doc}: /workflows/w/steps/0/args/v: NaN is not a number JSON can carry`, expect.stringContaining(`${doc}: /name: `)]));
    // A quoted integer stays text, 2^53 - 1 (`ok`) signs as written, and an own __proto__
    // member stays a member of what is signed.
    write('"12345678901234567890", __proto__: {x: 1}');
    const ok = await runSvc(['bundle', 'sign', file, '--key', KEY]);
    expect(ok.code, ok.stderr).toBe(0);
    const args = JSON.parse(ok.stdout).bundle.workflows.w.steps[0].args;
    expect(args.ok).toBe(9007199254740991);
    expect(args.v).toBe('12345678901234567890');
    expect(Object.hasOwn(args, '__proto__')).toBe(true);
    expect(ok.stdout).toMatch(/"__proto__": \{\s*"x": 1\s*\}/);
  });
});

describe('svc bundle sign (D 4)', () => {
  it('signs YAML into {bundle, signature} over JCS(bundle), to stdout or -o', async () => {
    const r = await runSvc(['bundle', 'sign', BUNDLE, '--key', KEY]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.bundle).toEqual(refunds);
    expect(doc.signature.key_id).toBe('demo-publisher');
    const ok = verifyBytes(Buffer.from(demo.public_key, 'base64url'), Buffer.from(canonicalJson(doc.bundle)), Buffer.from(doc.signature.signature, 'base64url'));
    expect(ok).toBe(true);

    const out = join(tempDir(), 'signed.json');
    const w = await runSvc(['bundle', 'sign', BUNDLE, '--key', KEY, '-o', out]);
    expect(w.code).toBe(0);
    expect(w.stdout).toMatch(/signed refunds 1\.0\.0 \(bnd_[0-9a-f]{26}\) with demo-publisher/);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(doc);
    // A signed document validates as its bundle and shows who signed it.
    const v = await runSvc(['bundle', 'validate', out]);
    expect(v.stdout).toMatch(/carries a signature by demo-publisher \(not checked here; svcd checks it on push\)/);
  });

  it('sign --json prints the signed document on one line; -o DIR says it is a directory', async () => {
    const r = await runSvc(['--json', 'bundle', 'sign', BUNDLE, '--key', KEY]);
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(JSON.parse(r.stdout).bundle).toEqual(refunds);
    const dir = tempDir();
    const d = await runSvc(['bundle', 'sign', BUNDLE, '--key', KEY, '-o', dir]);
    expect([d.code, d.stderr]).toEqual([1, `svc: cannot write ${dir}: is a directory\n`]);
  });

  it('refuses to sign an invalid bundle, a bad key file, or without --key', async () => {
    const bad = await runSvc(['bundle', 'sign', badBundleFile(), '--key', KEY]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/nothing signed/);
    expect(bad.stderr).toMatch(/\/version: must be a semantic version/);
    const keyFile = join(tempDir(), 'key.json');
    writeFileSync(keyFile, JSON.stringify({ ...demo, private_key: 'AAAA' }));
    const badKey = await runSvc(['bundle', 'sign', BUNDLE, '--key', keyFile]);
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toMatch(/32-byte/);
    const noKey = await runSvc(['bundle', 'sign', BUNDLE]);
    expect(noKey.code).toBe(2);
  });
});

describe('svc bundle push, list, show against svcd (I 4.1)', () => {
  it('pushes (signing with --key), finds the same bundle again, lists and shows it', async () => {
    await using d = await daemon();
    const url = ['--kernel-url', d.kernelUrl!];
    const first = await runSvc([...url, 'bundle', 'push', BUNDLE, '--key', KEY]);
    expect(first.code).toBe(0);
    const id = bundleId(refunds);
    expect(first.stdout.trim()).toBe(`created: refunds 1.0.0 ${id}`);

    const out = join(tempDir(), 'signed.json');
    await runSvc(['bundle', 'sign', BUNDLE, '--key', KEY, '-o', out]);
    const again = await runSvc([...url, '--json', 'bundle', 'push', out]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ status: 'exists', bundle_id: id, name: 'refunds', version: '1.0.0', key_id: 'demo-publisher' });

    const list = await runSvc([...url, 'bundle', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^BUNDLE_ID\s+NAME\s+VERSION\s+WORKFLOWS\s+SIGNED_BY\s+CREATED/);
    expect(list.stdout).toContain(`${id}  refunds  1.0.0    refund     demo-publisher`);
    const listJson = await runSvc([...url, '--json', 'bundle', 'list']);
    expect(JSON.parse(listJson.stdout).bundles.map((b: { bundle_id: string }) => b.bundle_id)).toEqual([id]);

    const show = await runSvc([...url, 'bundle', 'show', id]);
    expect(show.code).toBe(0);
    expect(parse(show.stdout)).toMatchObject({ bundle_id: id, name: 'refunds', bundle: refunds, signature: { key_id: 'demo-publisher' } });
    const showJson = await runSvc([...url, '--json', 'bundle', 'show', id]);
    expect(showJson.code, showJson.stderr).toBe(0);
    expect(JSON.parse(showJson.stdout).bundle).toEqual(refunds);
    // By name, as run start takes it: NAME (the newest) or NAME@VERSION.
    for (const ref of ['refunds', 'refunds@1.0.0']) {
      const byName = await runSvc([...url, '--json', 'bundle', 'show', ref]);
      expect(JSON.parse(byName.stdout).bundle_id, ref).toBe(id);
    }
    // svc(1) DESCRIPTION: a bidi override or an escape sequence in a bundle's text is shown as
    // a YAML escape, and the YAML still reads back as the bundle.
    const tricky = { ...refunds, version: '1.0.1', description: `refunds \u202eevil\u202c \u001b[2J\u200b` };
    const trickyFile = join(tempDir(), 'tricky.json');
    writeFileSync(trickyFile, JSON.stringify(tricky));
    expect((await runSvc([...url, 'bundle', 'push', trickyFile, '--key', KEY])).code).toBe(0);
    const trickyShow = await runSvc([...url, 'bundle', 'show', 'refunds@1.0.1']);
    expect(trickyShow.code).toBe(0);
    expect(trickyShow.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\p{Cf}]/u);
    expect(trickyShow.stdout).toContain('description: "refunds \\u202eevil\\u202c \\e[2J\\u200b"');
    expect(parse(trickyShow.stdout).bundle).toEqual(tricky);

    const noSuch = await runSvc([...url, 'bundle', 'show', 'refunds@9.9.9']);
    expect(noSuch.code).toBe(1);
    expect(noSuch.stderr).toContain('no bundle refunds@9.9.9 on the kernel');
  });

  it('reports refusals with exit 1: unsigned, other content, invalid, unknown id', async () => {
    await using d = await daemon();
    const url = ['--kernel-url', d.kernelUrl!];
    const unsigned = await runSvc([...url, 'bundle', 'push', BUNDLE]);
    expect(unsigned.code).toBe(1);
    expect(unsigned.stderr).toMatch(/bundle_signature_invalid: .*unsigned.*--key KEYFILE/);

    await runSvc([...url, 'bundle', 'push', BUNDLE, '--key', KEY]);
    const changed = join(tempDir(), 'changed.json');
    writeFileSync(changed, JSON.stringify({ ...refunds, description: 'other' }));
    const conflict = await runSvc([...url, 'bundle', 'push', changed, '--key', KEY]);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toMatch(/bundle_version_exists/);

    // Signed but invalid: svc checks it before sending, lists every problem and sends nothing.
    const b = structuredClone(refunds);
    b.version = '2.0.0';
    b.workflows.refund.steps[1].prompt = 'missing';
    b.workflows.refund.steps[2].args.amount = '{{steps.nope.output}}';
    const { signBundle } = await import('../../src/bundle/sign.js');
    const invalid = join(tempDir(), 'invalid.json');
    writeFileSync(invalid, JSON.stringify({ bundle: b, signature: signBundle(b, demo) }));
    const refused = await runSvc([...url, 'bundle', 'push', invalid]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${invalid}: /workflows/refund/steps/1/prompt: unknown prompt "missing"`);
    expect(refused.stderr).toContain(`${invalid}: /workflows/refund/steps/2/args/amount: template {{steps.nope.output}} names no step`);
    expect(refused.stderr.split('\n')[0]).toBe(`svc: bundle_invalid: ${invalid} is not a valid bundle; nothing sent:`);
    const refusedJson = await runSvc([...url, '--json', 'bundle', 'push', invalid]);
    expect(JSON.parse(refusedJson.stdout).error.code).toBe('bundle_invalid');
    expect(JSON.parse((await runSvc([...url, '--json', 'bundle', 'list'])).stdout).bundles.map((x: any) => x.version)).not.toContain('2.0.0');
    // Not a bundle at all (a text that YAML reads as one string), unsigned: the same, offline.
    const notBundle = join(tempDir(), 'notes.txt');
    writeFileSync(notBundle, 'just some words\n');
    const words = await runSvc([...url, 'bundle', 'push', notBundle]);
    expect(words.code).toBe(1);
    expect(words.stderr).toMatch(/^svc: bundle_invalid: .*notes\.txt is not a valid bundle; nothing sent:\n.*notes\.txt: \/: /);

    const unknown = await runSvc([...url, 'bundle', 'show', 'bnd_nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/not_found/);
    // A name the CLI resolves itself: the same envelope on stdout with --json (svc(1)).
    const byName = await runSvc([...url, '--json', 'bundle', 'show', 'nope@9']);
    expect(byName.code).toBe(1);
    expect(JSON.parse(byName.stdout)).toMatchObject({ error: { code: 'not_found', details: { resource: 'bundle', id: 'nope@9' } } });
    expect(byName.stderr).toContain('no bundle nope@9 on the kernel');
  });

  it('exits 3 when svcd is unreachable', async () => {
    const r = await runSvc(['--kernel-url', NO_DAEMON, 'bundle', 'list']);
    expect(r.code).toBe(3);
  });
});

describe('svc bundle push against an svcd stricter than this svc (svc(1) bundle push)', () => {
  it("prints every problem svcd lists, for a bundle this svc's offline check passed", async () => {
    const { createServer } = await import('node:http');
    const problems = [
      { path: '/workflows/refund/steps/0', message: 'a newer rule' },
      { path: '/tools', message: 'another one' },
    ];
    const server = createServer((_req, res) => {
      res.writeHead(422, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'bundle_invalid', message: 'bundle is invalid', details: { path: problems[0]!.path, problems } } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const file = join(ROOT, 'fixtures/bundles/refunds.yaml');
      const r = await runSvc(['--kernel-url', url, 'bundle', 'push', file, '--key', KEY]);
      expect(r.code).toBe(1);
      expect(r.stderr.trimEnd().split('\n')).toEqual([
        `svc: bundle_invalid: svcd refused ${file}:`,
        `${file}: /workflows/refund/steps/0: a newer rule`,
        `${file}: /tools: another one`,
      ]);
    } finally {
      server.close();
    }
  });
});

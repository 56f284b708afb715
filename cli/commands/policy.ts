/**
 * `svc policy`: the policy language and policy versions (interface 2.3, 4.1; decisions 5).
 *   svc policy lint FILE                                offline; `FILE:LINE:COL: message`, exit 1 on errors
 *   svc policy push FILE --name N --version V
 *   svc policy list
 *   svc policy show NAME[@VERSION]                      the source (the latest version without @)
 *   svc policy test CORPUS --a NAME[@VER] --b NAME[@VER]|FILE [--fail-on-flip]
 * `test` prints the cases whose decision differs between A and B (POST /v1/policies/test);
 * with --fail-on-flip any flip exits 1, for CI.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import type { Command } from 'commander';
import { pointerToken } from '../../src/encoding/json-pointer.js';
import { POLICY_TYPES } from '../../src/policy/cel-env.js';
import { lintPolicy, policyNotes } from '../../src/policy/compile.js';
import { testInSlices } from '../../src/policy/corpus-slices.js';
import type { PolicySummary, PolicyTestResult } from '../../src/policy/policy-service.js';
import type { StoredPolicy } from '../../src/types.js';
import { globals, kernelClient, output, table } from '../context.js';
import { CliError, EXIT, fsReason, usageError } from '../exit.js';
import { isObject, type SvcHttpClient } from '../http-client.js';
import { fit } from '../terminal-text.js';
import { readDataFile } from './data-file.js';
import { parseRef, policyPath } from './policy-ref.js';

export { registerPolicy } from '../register/policy.js';

export { parseRef, policyPath };

export interface LintProblem {
  line: number;
  column: number;
  message: string;
}

function readSource(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${fsReason(err)}`, EXIT.failed);
  }
}

/** `FILE:LINE:COL: message`, one per problem, like a compiler. */
export function formatLint(file: string, problems: LintProblem[]): string {
  return problems.map((p) => `${file}:${p.line}:${p.column}: ${p.message}`).join('\n');
}

/** `svc policy lint`: every problem of a policy file, offline. */
export function handleLint(file: string): { ok: boolean; file: string; problems: LintProblem[]; notes: LintProblem[] } {
  const source = readSource(file);
  const problems = lintPolicy(source).map((d) => ({ line: d.line, column: d.column, message: d.message }));
  const notes = policyNotes(source).map((d) => ({ line: d.line, column: d.column, message: d.message }));
  return { ok: problems.length === 0, file, problems, notes };
}

export interface PushResult {
  status: 'created' | 'exists';
  policy_id: string;
  name: string;
  version: string;
}

/** `svc policy push`: POST /v1/policies; a policy_invalid answer is shown like lint. */
export async function handlePush(client: SvcHttpClient, file: string, name: string, version: string): Promise<PushResult> {
  const source = readSource(file);
  try {
    const res = await client.request<{ policy_id: string; name: string; version: string }>('POST', '/policies', { name, version, source }, {}, ['policy_id']);
    return { status: res.status === 201 ? 'created' : 'exists', ...res.body };
  } catch (err) {
    const e = err as CliError;
    const env = (e.body as { error?: { code?: string; details?: { problems?: LintProblem[]; line?: number; column?: number; message?: string } } } | undefined)?.error;
    if (env?.code === 'policy_invalid' && env.details) {
      const problems = env.details.problems ?? [{ line: env.details.line!, column: env.details.column!, message: env.details.message! }];
      throw new CliError(`policy_invalid: svcd refused ${file}:\n${formatLint(file, problems)}`, EXIT.failed, e.body);
    }
    throw err;
  }
}

export async function handleList(client: SvcHttpClient): Promise<{ policies: PolicySummary[] }> {
  return (await client.request<{ policies: PolicySummary[] }>('GET', '/policies', undefined, {}, ['policies'])).body;
}

export async function handleShow(client: SvcHttpClient, ref: string): Promise<StoredPolicy> {
  return (await client.request<StoredPolicy>('GET', policyPath(ref), undefined, {}, ['name', 'version', 'source'])).body;
}

/** A corpus file (a JSON or YAML list of {action, run}, or {corpus: [...]}): its cases, and the pointer they sit under ('' or '/corpus'). */
export function readCorpus(file: string): { cases: unknown[]; at: string } {
  const value = readDataFile(file);
  const cases = Array.isArray(value) ? value : (value as { corpus?: unknown } | null)?.corpus;
  if (!Array.isArray(cases)) throw new CliError(`${file} must hold a list of {action, run} cases (or {corpus: [...]})`, EXIT.failed);
  return { cases, at: Array.isArray(value) ? '' : '/corpus' };
}

/**
 * Members of a case's action and run the kernel does not read (svc-policy(5), POLICY TESTS:
 * members left out take defaults). The kernel ignores unknown members of a request body
 * (docs/design.md), so an `arg` for `args` or `inputs` for `input` is decided as a case
 * without them, and flips nothing: said here, on standard error, with the case's pointer in
 * the file. Members of the case itself (the fixture's `note`) and of args and input are the
 * author's own.
 */
export function corpusWarnings(list: readonly unknown[], prefix: string): Array<{ path: string; message: string }> {
  const remit = [...Object.keys(POLICY_TYPES.Remit), 'grants'];
  const shapes: Array<[string[], string, readonly string[]]> = [
    [['action'], 'an action', Object.keys(POLICY_TYPES.Action)],
    [['run'], 'a run', Object.keys(POLICY_TYPES.Run)],
    [['run', 'requested_by'], 'requested_by', Object.keys(POLICY_TYPES.Requester)],
    [['run', 'usage'], 'usage', Object.keys(POLICY_TYPES.Usage)],
    [['run', 'remit'], 'a remit', remit],
  ];
  const out: Array<{ path: string; message: string }> = [];
  list.forEach((c, i) => {
    for (const [at, what, members] of shapes) {
      let v: unknown = c;
      for (const k of at) v = isObject(v) ? v[k] : undefined;
      if (!isObject(v)) continue;
      for (const k of Object.keys(v)) {
        if (members.includes(k)) continue;
        out.push({ path: `${prefix}/${i}/${at.join('/')}/${pointerToken(k)}`, message: `"${k}" is not a member of ${what} (its members: ${members.join(', ')}); the case is decided without it` });
      }
    }
  });
  return out;
}

export interface TestOutput extends PolicyTestResult {
  /** The corpus, for the one-line action views. */
  corpus: unknown[];
}

/** `svc policy test`: A against B over a corpus. `b` is NAME[@VER] or a policy source file. */
export async function handleTest(client: SvcHttpClient, corpusFile: string, a: string, b: string): Promise<TestOutput> {
  const { cases: corpus, at } = readCorpus(corpusFile);
  for (const w of corpusWarnings(corpus, at)) process.stderr.write(`${corpusFile}: ${w.path}: warning: ${w.message}\n`);
  // The interface takes A by name only; a file there is the natural slip, since --b takes one.
  if (a.includes('/') || a.endsWith('.policy')) {
    throw usageError(`--a names a pushed policy (NAME or NAME@VERSION), not a file: push ${a} first (svc policy push ${a} --name NAME --version VERSION); --b may be a file`);
  }
  const policyA = parseRef(a, '--a');
  // A name never holds a '/' or ends in .policy: such a value is a file, and a missing one
  // is said to be missing rather than refused as a malformed name.
  const exists = existsSync(b) && statSync(b).isFile();
  const bIsFile = exists || b.includes('/') || b.endsWith('.policy');
  // A bare name that is also a file here could mean either: said, not guessed.
  if (exists && !b.includes('/') && !b.endsWith('.policy')) {
    throw usageError(`--b ${b} is both a file here and a policy name: write ./${b} for the file, or ${b}@VERSION for the stored policy`);
  }
  const policyB = bIsFile ? { source: readSource(b) } : parseRef(b, '--b');
  try {
    // The kernel takes 1 MiB a request (decisions §10): a larger corpus goes in slices.
    const result = await testInSlices(async (body) => (await client.request<PolicyTestResult>('POST', '/policies/test', body)).body, { policy_a: policyA, policy_b: policyB, corpus, explain: true });
    return { ...result, corpus };
  } catch (err) {
    const e = err as CliError;
    const env = (e.body as { error?: { code?: string; details?: { problems?: LintProblem[] } } } | undefined)?.error;
    if (bIsFile && env?.code === 'policy_invalid' && env.details?.problems) {
      throw new CliError(`policy_invalid: ${b} does not compile:\n${formatLint(b, env.details.problems)}`, EXIT.failed, e.body);
    }
    throw err;
  }
}

/**
 * `billing.refund: refund 150 on inv_1001` from the action's summary (D 5.1) when it has one,
 * else `billing.refund {"amount":150,…}`; cut to `width` terminal columns, between graphemes.
 * The summary says what the action does in the words of its proposer, where the args' first
 * members are often ids.
 */
export function actionView(c: unknown, width = 72): string {
  const action = (c as { action?: { tool?: unknown; args?: unknown; summary?: unknown } } | null)?.action;
  const tool = String(action?.tool ?? '?');
  const summary = typeof action?.summary === 'string' ? action.summary.replace(/\s+/g, ' ').trim() : '';
  const text = summary ? `${tool}: ${summary}` : `${tool} ${JSON.stringify(action?.args ?? {})}`;
  return fit(text, width);
}

function refText(r: PolicyTestResult['policy_a'] | PolicyTestResult['policy_b']): string {
  return 'source' in r ? `${r.name} (source)` : `${r.name}@${r.version}`;
}

function testHuman(r: TestOutput): string {
  const changes = r.approver_changes ?? [];
  const moved = changes.length > 0 ? `; ${changes.length} case${changes.length === 1 ? '' : 's'} with another approver` : '';
  const head = `${r.flips.length} flip${r.flips.length === 1 ? '' : 's'} in ${r.cases} case${r.cases === 1 ? '' : 's'}${moved}: A = ${refText(r.policy_a)}, B = ${refText(r.policy_b)}`;
  const flips = r.flips.length === 0 ? '' : table(['INDEX', 'A → B', 'RULE A', 'RULE B', 'ACTION'], r.flips.map((f) => [f.index, `${f.a} → ${f.b}`, f.rule_a, f.rule_b, actionView(r.corpus[f.index])])) + '\n\n' + failedConditions(r.flips);
  // Not flips (D 5.3): approval_required under both, asked of another role.
  const approvers = changes.length === 0 ? '' : `approval_required under both, another approver:\n${table(['INDEX', 'APPROVER A → B', 'RULE A', 'RULE B', 'ACTION'], changes.map((c) => [c.index, `${c.a} → ${c.b}`, c.rule_a, c.rule_b, actionView(r.corpus[c.index])]))}\n\n`;
  return flips + approvers + head;
}

/**
 * The conditions that failed in flipped cases, once per policy, rule and message with the
 * cases it failed in: a flip that comes from a condition failing closed (a misspelt argument)
 * reads in the table like one the policy meant.
 */
function failedConditions(flips: PolicyTestResult['flips']): string {
  const seen = new Map<string, number[]>();
  for (const f of flips) {
    for (const [side, errors] of [['A', f.errors_a], ['B', f.errors_b]] as const) {
      for (const e of errors ?? []) {
        const key = `${side}  ${e.rule}: ${e.message}`;
        const list = seen.get(key) ?? [];
        if (!list.includes(f.index)) list.push(f.index);
        seen.set(key, list);
      }
    }
  }
  if (seen.size === 0) return '';
  const lines = [...seen].map(([key, idx]) => fit(`  ${key} (case${idx.length === 1 ? '' : 's'} ${idx.slice(0, 5).join(', ')}${idx.length > 5 ? ', …' : ''})`, 200));
  return `conditions that failed in these cases (failing closed, they count as matched for deny and require_approval, and not for allow):\n${lines.join('\n')}\n\n`;
}

/**
 * What each `svc policy` command does when it runs. The commands themselves (names, options, help
 * texts) are defined in cli/register/policy.ts, which loads this module only when one of them
 * runs (docs/design.md, "CLI start-up").
 */
export const policyActions = {
  lint(this: Command, file: string) {
    const r = handleLint(file);
    if (globals(this).json) process.stdout.write(JSON.stringify(r) + '\n');
    else {
      // Notes are not problems: on stderr, and the exit status is the problems' alone.
      if (r.notes.length > 0) process.stderr.write(formatLint(file, r.notes) + '\n');
      if (r.ok) process.stderr.write(`${file}: no problems\n`);
      else process.stdout.write(formatLint(file, r.problems) + '\n');
    }
    if (!r.ok) throw new CliError(`${r.problems.length} problem${r.problems.length === 1 ? '' : 's'} in ${file}`, EXIT.failed);
  },

  async push(this: Command, file: string, o: { name: string; version: string }) {
    const r = await handlePush(kernelClient(this), file, o.name, o.version);
    output(this, r, (x: PushResult) => `${x.status === 'created' ? 'created' : 'already stored'}: ${x.name}@${x.version} ${x.policy_id}`);
  },

  async list(this: Command) {
    output(this, await handleList(kernelClient(this)), (r: { policies: PolicySummary[] }) =>
      r.policies.length === 0 ? 'no policies' : table(['NAME', 'VERSION', 'POLICY_ID', 'CREATED'], r.policies.map((p) => [p.name, p.version, p.policy_id, p.created_at])),
    );
  },

  async show(this: Command, ref: string) {
    output(this, await handleShow(kernelClient(this), ref), (p: StoredPolicy) => `# ${p.name}@${p.version} (${p.policy_id}, ${p.created_at})\n${p.source}`);
  },

  async test(this: Command, corpusFile: string, o: { a: string; b: string; failOnFlip?: boolean }) {
    const r = await handleTest(kernelClient(this), corpusFile, o.a, o.b);
    const { corpus: _corpus, ...data } = r;
    output(this, data, () => testHuman(r));
    if (o.failOnFlip && r.flips.length > 0) throw new CliError(`${r.flips.length} flip${r.flips.length === 1 ? '' : 's'} (--fail-on-flip)`, EXIT.failed);
  },
};

/**
 * The man pages document what the code does (style: "a test checks every code appears in the
 * man pages"): every error code of src/errors.ts with its status in man/svcd.8, the svcd flags
 * and environment, and the svc global options, exit codes and keys/remit commands in man/svc.1.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram as buildSvc } from '../../cli/index.js';
import { buildProgram as buildSvcd } from '../../daemon/svcd.js';
import { ERROR_CODES } from '../../src/errors.js';
import { ROOT } from '../helpers/daemon.js';

/** The page text with roff escapes for '-' undone, so flags can be searched as typed. */
function page(name: string): string {
  return readFileSync(join(ROOT, 'man', name), 'utf8').replace(/\\-/g, '-');
}

describe('man/svcd.8', () => {
  const text = page('svcd.8');
  it('is a roff man page in section 8', () => {
    expect(text).toMatch(/^\.TH SVCD 8 /m);
    for (const s of ['NAME', 'SYNOPSIS', 'OPTIONS', 'ENVIRONMENT', 'ERRORS', 'KEYS', 'REMITS']) expect(text).toMatch(new RegExp(`^\\.SH ${s}`, 'm'));
  });
  it('documents every error code of src/errors.ts with its status', () => {
    const missing = Object.entries(ERROR_CODES).filter(([code, { status }]) => !new RegExp(`^\\.BR ${code} " \\(${status}\\)"$`, 'm').test(text));
    expect(missing.map(([c]) => c)).toEqual([]);
  });
  it('documents the flags, environment variables and the startup line', () => {
    for (const f of ['--config', '--data-dir', '--kernel-listen', '--gateway-listen', '--gateway-config', '--publisher', '--no-kernel', '--no-gateway', '--log-level', 'keys rotate']) expect(text).toContain(f);
    for (const v of ['SVC_TOKEN', 'SVC_SIGNING_KEY', 'SVC_PUBLISHERS', 'SVC_CLOCK_SKEW_SECONDS', 'SVC_LOG_LEVEL']) expect(text).toContain(v);
    expect(text).toContain('{"kernel":"http://127.0.0.1:7401","gateway":"http://127.0.0.1:7402"}'); // compact, as svcd prints it
    expect(text).toMatch(/SIGTERM/);
    expect(text).toMatch(/flag, then environment variable, then configuration file, then\s+default/);
  });
});

describe('man/svc.1', () => {
  const text = page('svc.1');
  it('is a roff man page in section 1 with the global options and exit codes', () => {
    expect(text).toMatch(/^\.TH SVC 1 /m);
    for (const o of ['--kernel-url', '--gateway-url', '--token', '--actor', '--json', 'SVC_KERNEL_URL', 'SVC_GATEWAY_URL', 'SVC_TOKEN', 'SVC_ACTOR']) expect(text).toContain(o);
    const exit = text.slice(text.indexOf('.SH EXIT STATUS'));
    for (const code of ['0', '1', '2', '3']) expect(exit).toMatch(new RegExp(`^\\.B ${code}$`, 'm'));
  });
  it('documents svc keys and svc remit with every mint/derive flag', () => {
    for (const c of ['svc keys gen', 'svc keys publisher', 'svc keys show', 'svc remit mint', 'svc remit derive', 'svc remit show', 'svc remit decode']) expect(text).toContain(c);
    for (const f of ['--tools', '--scopes', '--grants', '--policy-set', '--spend-tokens', '--spend-usd', '--autonomy', '--ttl', '--requested-by']) expect(text).toContain(f);
  });
});

/** Every page in man/, by file name (svc-gateway.5) and as a reference (svc-gateway(5)). */
const PAGES = readdirSync(join(ROOT, 'man')).filter((f) => /\.\d$/.test(f));
const asRef = (file: string) => file.replace(/\.(\d)$/, '($1)');

/** The page's text with fonts and macros undone and lines joined, as a reader sees it. */
function prose(text: string): string {
  return text
    .split('\n')
    .filter((l) => !l.startsWith('.\\"'))
    .map((l) => l.replace(/^\.(?:B|I|BR|RB|IR|RI|BI|IB|TP|PP|SH|SS|IP|EX|EE|in|RS|RE|nf|fi)\b ?/, ''))
    .join(' ')
    .replace(/\\f[BIRP]/g, '')
    .replace(/"/g, '')
    .replace(/\s+/g, ' ');
}

describe('cross-references between the man pages', () => {
  it.each(PAGES)('%s lists in SEE ALSO every page it refers to, and each exists', (file) => {
    const text = page(file);
    const at = text.search(/^\.SH "?SEE ALSO/m);
    expect(at).toBeGreaterThan(0);
    const refs = (s: string) => new Set([...prose(s).matchAll(/\b(svcd|svc(?:-[a-z]+)?) ?\((\d)\)/g)].map((m) => `${m[1]}(${m[2]})`));
    const seeAlso = refs(text.slice(at));
    const inText = [...refs(text.slice(0, at))].filter((r) => r !== asRef(file));
    expect(inText.filter((r) => !seeAlso.has(r))).toEqual([]);
    expect([...seeAlso].filter((r) => !PAGES.map(asRef).includes(r))).toEqual([]);
  });

  it.each(PAGES)('%s: a section named by "see SECTION" or "page(N), SECTION" is one that page has', (file) => {
    const sections = (f: string) => [...page(f).matchAll(/^\.SH "?([^"\n]+)"?$/gm)].map((m) => m[1]!.trim());
    const text = prose(page(file));
    const bad: string[] = [];
    for (const m of text.matchAll(/\b[Ss]ee ([A-Z][A-Z]+(?: [A-Z][A-Z]+)*)\b/g)) {
      if (!sections(file).includes(m[1]!)) bad.push(m[0]);
    }
    for (const m of text.matchAll(/\b(svcd|svc(?:-[a-z]+)?)\((\d)\),? ([A-Z][A-Z]+(?: [A-Z][A-Z]+)*)\b/g)) {
      const target = `${m[1]}.${m[2]}`;
      if (PAGES.includes(target) && !sections(target).some((s) => s === m[3] || s.startsWith(`${m[3]} `))) bad.push(m[0]);
    }
    expect(bad).toEqual([]);
  });

  it('the README names sections the pages have', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ');
    const named = [...readme.matchAll(/\b(svcd|svc(?:-[a-z]+)?)\((\d)\),? ([A-Z][A-Z]+(?: [A-Z][A-Z]+)*)\b/g)];
    expect(named.length).toBeGreaterThanOrEqual(2);
    for (const m of named) expect(page(`${m[1]}.${m[2]}`), m[0]).toMatch(new RegExp(`^\\.SH "?${m[3]}`, 'm'));
  });
});

/** Every command below `program`, with its words (`run start`). */
function commands(program: Command): Array<{ path: string; cmd: Command }> {
  const out: Array<{ path: string; cmd: Command }> = [];
  const walk = (cmd: Command, words: string[]) => {
    for (const sub of cmd.commands) {
      if (sub.name() === 'help') continue;
      out.push({ path: [...words, sub.name()].join(' '), cmd: sub });
      walk(sub, [...words, sub.name()]);
    }
  };
  walk(program, []);
  return out;
}

const longFlags = (cmd: Command) => cmd.options.filter((o) => !o.hidden && o.long && o.long !== '--help').map((o) => o.long!);
/** The flags a page mentions, as typed. */
const pageFlags = (text: string) => new Set(text.replace(/\\f[BIRP]/g, '').match(/(?<![\w-])--[a-z][a-z0-9-]*/g));

describe('every flag --help lists is in the man page, and every flag the page names exists', () => {
  const svcPage = (path: string) => (path.startsWith('approvals') ? 'svc-approvals.1' : path.startsWith('worker') ? 'svc-worker.1' : 'svc.1');

  it('svc: each command is in its page with each of its flags', () => {
    const program = buildSvc();
    const missing: string[] = [];
    for (const f of longFlags(program)) if (!page('svc.1').includes(f)) missing.push(`svc ${f}`);
    for (const { path, cmd } of commands(program)) {
      const text = page(svcPage(path));
      if (!cmd.commands.length && !prose(text).includes(`svc ${path}`) && !prose(text).includes(`${path.split(' ').at(-1)} `)) missing.push(`svc ${path}`);
      for (const f of longFlags(cmd)) if (!pageFlags(text).has(f)) missing.push(`svc ${path} ${f} (${svcPage(path)})`);
    }
    expect(missing).toEqual([]);
  });

  it('svc: a flag svc.1, svc-approvals.1 or svc-worker.1 names is one svc takes (or svcd\'s, where they say so)', () => {
    const program = buildSvc();
    const known = new Set([...longFlags(program), ...commands(program).flatMap(({ cmd }) => longFlags(cmd)), '--help', '--version']);
    const svcdFlags = new Set([...longFlags(buildSvcd()), ...commands(buildSvcd()).flatMap(({ cmd }) => longFlags(cmd))]);
    for (const file of ['svc.1', 'svc-approvals.1', 'svc-worker.1']) {
      const unknown = [...pageFlags(page(file))].filter((f) => !known.has(f) && !svcdFlags.has(f));
      expect([file, unknown]).toEqual([file, []]);
    }
  });

  it('svcd: every flag of svcd and its commands is in svcd.8, and svcd.8 names no other', () => {
    const program = buildSvcd();
    const text = page('svcd.8');
    const all = [...longFlags(program), ...commands(program).flatMap(({ cmd }) => longFlags(cmd))];
    expect(all.filter((f) => !pageFlags(text).has(f))).toEqual([]);
    for (const { path } of commands(program)) expect(text).toContain(`svcd ${path}`);
    // The page also names svc's --actor (in an example) and node's --max-old-space-size.
    const svcFlags = new Set([...longFlags(buildSvc()), ...commands(buildSvc()).flatMap(({ cmd }) => longFlags(cmd))]);
    const other = [...pageFlags(text)].filter((f) => !all.includes(f) && !svcFlags.has(f) && !['--help', '--version', '--max-old-space-size'].includes(f));
    expect(other).toEqual([]);
  });
});

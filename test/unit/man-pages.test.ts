/**
 * The man pages document what the code does (style: "a test checks every code appears in the
 * man pages"): every error code of src/errors.ts with its status in man/svcd.8, the svcd flags
 * and environment, and the svc global options, exit codes and keys/remit commands in man/svc.1.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
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

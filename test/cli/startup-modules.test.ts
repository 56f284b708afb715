/**
 * What `svc` loads to start (docs/design.md, "CLI start-up"): the commands that read or print
 * what svcd holds, and --version and --help, load neither the YAML parser, the JSON Schema
 * validator, the policy compiler (CEL, RE2) nor the worker runtime; the commands that use them
 * load them when they run. Structural, not timed: the modules are listed by a loader hook in the
 * child process (test/helpers/load-log.mjs); bench/cli-startup.ts measures the time.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { NO_DAEMON } from '../helpers/cli.js';
import { ROOT, tempDir } from '../helpers/daemon.js';
import { loadLogged, modulesIn } from '../helpers/loaded-modules.js';

/** Every module `svc args…` loaded through the ES module loader, as paths below the package root. */
function modulesLoaded(args: string[]): { code: number | null; modules: string[] } {
  const file = join(tempDir('svc-startup-'), 'loaded.txt');
  const { execArgs, env } = loadLogged(file);
  const r = spawnSync(process.execPath, [...execArgs, join(ROOT, 'dist/cli/index.js'), ...args], {
    env: { ...process.env, SVC_KERNEL_URL: '', SVC_GATEWAY_URL: '', SVC_ACTOR: '', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { code: r.status, modules: modulesIn(file) };
}

/** The libraries and runtimes a light command must not load, each by its path below the package root. */
const HEAVY = {
  yaml: 'node_modules/yaml/',
  ajv: 'node_modules/ajv/',
  cel: 'node_modules/@marcbachmann/cel-js/',
  re2js: 'node_modules/re2js/',
  'string-width': 'node_modules/string-width/',
  'the worker runtime': 'dist/src/worker/worker.js',
  'the bundle validator': 'dist/src/bundle/validate.js',
  'the policy compiler': 'dist/src/policy/compile.js',
};

function heavyIn(modules: string[]): string[] {
  return Object.entries(HEAVY)
    .filter(([, prefix]) => modules.some((m) => m.startsWith(prefix)))
    .map(([name]) => name);
}

describe('svc start-up loads what the command uses (design.md, CLI start-up)', () => {
  const light: Array<[string, string[], number]> = [
    ['--version', ['--version'], 0],
    ['--help', ['--help'], 0],
    ['run list, svcd unreachable', ['run', 'list', '--kernel-url', NO_DAEMON], 3],
    ['run show, svcd unreachable', ['run', 'show', 'run_1', '--kernel-url', NO_DAEMON], 3],
    ['approvals list, svcd unreachable', ['approvals', 'list', '--kernel-url', NO_DAEMON], 3],
    ['remit show, svcd unreachable', ['remit', 'show', 'rmt_1', '--kernel-url', NO_DAEMON], 3],
    ['gateway tools, gateway unreachable', ['gateway', 'tools', '--gateway-url', NO_DAEMON], 3],
    ['worker --help', ['worker', '--help'], 0],
  ];
  for (const [name, args, code] of light) {
    it(`${name}: none of YAML, JSON Schema, CEL, RE2, string-width or the worker`, () => {
      const r = modulesLoaded(args);
      expect(r.code).toBe(code);
      expect(r.modules).toContain('dist/cli/index.js');
      expect(heavyIn(r.modules)).toEqual([]);
    });
  }

  it('bundle validate loads YAML and JSON Schema when it runs; policy lint the policy compiler, without JSON Schema', () => {
    const bundle = modulesLoaded(['bundle', 'validate', join(ROOT, 'fixtures/bundles/refunds.yaml')]);
    expect(bundle.code).toBe(0);
    expect(heavyIn(bundle.modules)).toEqual(expect.arrayContaining(['yaml', 'ajv', 'the bundle validator']));
    const policy = modulesLoaded(['policy', 'lint', join(ROOT, 'fixtures/policies/refunds-v1.policy')]);
    expect(policy.code).toBe(0);
    expect(heavyIn(policy.modules)).toEqual(expect.arrayContaining(['cel', 'the policy compiler']));
    expect(heavyIn(policy.modules)).not.toContain('ajv');
  });
});

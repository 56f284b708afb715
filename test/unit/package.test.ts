/**
 * svc as a package someone installs, not a repository someone clones: what `npm pack` puts in
 * the tarball, that what it ships needs nothing outside `dependencies`, that npm links the man
 * pages on a global install, and that the commands' help names the installed manual.
 * Run `npx tsc -p tsconfig.json` first (the help test runs the built bins).
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { runSvc } from '../helpers/cli.js';
import { ROOT } from '../helpers/daemon.js';
import { openError } from '../../src/store/sqlite-db.js';

const run = promisify(execFile);

interface Pkg {
  bin: Record<string, string>;
  man?: string[];
  files: string[];
  dependencies: Record<string, string>;
  overrides?: Record<string, string>;
}
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Pkg;

/** The paths `npm pack` would put in the tarball (no build: --ignore-scripts). */
let packed: string[] = [];
beforeAll(async () => {
  // Without the npm_* variables `npm test` sets, which would otherwise reach this npm.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')));
  const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, env, maxBuffer: 16 * 1024 * 1024 });
  packed = (JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0]!.files.map((f) => f.path).sort();
}, 60_000);

describe('the npm package', () => {
  it('ships the bins, the quickstart, every man page and the demo fixtures', () => {
    for (const rel of Object.values(pkg.bin)) expect(packed).toContain(rel);
    expect(packed).toContain('dist/quickstart/main.js');
    for (const page of readdirSync(join(ROOT, 'man'))) expect(packed).toContain(`man/${page}`);
    for (const f of ['fixtures/keys/demo-publisher.json', 'fixtures/bundles/refunds.yaml', 'fixtures/demo/gateway.yaml', 'fixtures/demo/billing.sql', 'fixtures/policies/refunds-v1.policy']) {
      expect(packed).toContain(f);
    }
  });

  it('ships the text of the license package.json declares (Apache-2.0 asks that recipients get a copy)', () => {
    expect(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).license).toBe('Apache-2.0');
    expect(packed).toContain('LICENSE');
    expect(readFileSync(join(ROOT, 'LICENSE'), 'utf8')).toMatch(/Apache License\s+Version 2\.0, January 2004/);
  });

  it('leaves out the tests, the benchmarks, the gateway test servers and anything a run writes', () => {
    const unwanted = packed.filter((p) =>
      /^(test|bench|docs|src|cli|daemon|quickstart|scripts|node_modules)\//.test(p) ||
      p.startsWith('dist/bench/') ||
      p.startsWith('fixtures/gateway/') ||
      /(^|\/)(\.demo|svc-data|gateway-data)(\/|$)/.test(p) ||
      /\.(ts|tsx|db|pem|key|log|tsbuildinfo)$/.test(p) ||
      /(^|\/)\.env/.test(p),
    );
    expect(unwanted).toEqual([]);
  });

  it('the only private key it ships is the demo key, and the file says so', () => {
    const withPrivate = packed.filter((p) => p.endsWith('.json') && /"private_key"/.test(readFileSync(join(ROOT, p), 'utf8')));
    expect(withPrivate).toEqual(['fixtures/keys/demo-publisher.json']);
    const key = JSON.parse(readFileSync(join(ROOT, 'fixtures/keys/demo-publisher.json'), 'utf8')) as { note: string; key_id: string };
    expect(key.key_id).toBe('demo-publisher');
    expect(key.note).toMatch(/^DEMO ONLY/);
  });

  it('what it ships imports no package outside "dependencies" (devDependencies are not installed)', () => {
    const missing = new Set<string>();
    for (const p of packed.filter((f) => /\.(js|mjs)$/.test(f))) {
      const text = readFileSync(join(ROOT, p), 'utf8');
      for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire(?:\.resolve)?\s*\(\s*)['"]([^'"./][^'"]*)['"]/g)) {
        const spec = m[1]!;
        if (spec.startsWith('node:')) continue;
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        if (!(name in pkg.dependencies)) missing.add(`${p}: ${spec}`);
      }
    }
    expect([...missing]).toEqual([]);
  });

  it('declares its man pages, so `npm install -g` links them where man finds them (man svc, man svcd)', () => {
    const pages = readdirSync(join(ROOT, 'man')).sort();
    expect((pkg.man ?? []).map((m) => m.replace(/^\.\//, '')).sort()).toEqual(pages.map((p) => `man/${p}`));
    for (const page of pages) {
      // npm files each page under man<N> by its suffix; .TH must agree, or `man N page` misses it.
      const th = /^\.TH\s+"?([^\s"]+)"?\s+"?(\d)/m.exec(readFileSync(join(ROOT, 'man', page), 'utf8'));
      expect(th, `${page} has a .TH line`).not.toBeNull();
      expect(`${th![1]!.toLowerCase()}.${th![2]}`).toBe(page);
    }
  });

  it("pins fastify's light-my-request as a dependency too: npm ignores a dependency's overrides (README, Two commands)", () => {
    // The override alone keeps cookie 2 (engines node >=22) out of this repository's install
    // only; an install of the package took light-my-request 6.8 and warned EBADENGINE on Node 20.
    expect(pkg.overrides?.['light-my-request']).toBeDefined();
    expect(pkg.dependencies['light-my-request']).toBe(pkg.overrides!['light-my-request']);
  });

  it('svc --help and svcd --help name the manual as installed, not only in the source tree; the quickstart says how to run it installed', async () => {
    const svc = await runSvc(['--help']);
    expect(svc.code).toBe(0);
    expect(svc.stdout).toContain('Manual: man svc once installed with npm install -g (man -l man/svc.1 in the source tree).');
    const svcd = await run(process.execPath, [join(ROOT, pkg.bin.svcd!), '--help']);
    expect(svcd.stdout).toContain('Manual: man svcd once installed with npm install -g (man -l man/svcd.8 in the source tree).');
    // `npm start` exists only in the repository; the quickstart's help says how to run it from the package.
    const quickstart = await run(process.execPath, [join(ROOT, 'dist/quickstart/main.js'), '--help']);
    expect(quickstart.stdout).toContain('node "$(npm root -g)/svc/dist/quickstart/main.js" [options]');
  });

  it('svcd says so when better-sqlite3 was installed without its native module, not "cannot open the lock: Could not locate the bindings file" and 13 paths', () => {
    // npm install --ignore-scripts (or an install script npm's allowScripts held back), then svcd.
    const tried = Array.from({ length: 13 }, (_, i) => ` → /x/node_modules/better-sqlite3/build/${i}/better_sqlite3.node`).join('\n');
    const missing = openError('the lock', '/d/owner.lock', new Error(`Could not locate the bindings file. Tried:\n${tried}`));
    expect(missing.message.split('\n')).toHaveLength(1);
    expect(missing.message).toMatch(/^cannot open the lock \/d\/owner\.lock: better-sqlite3's native module is missing or built for another Node\.js than v\d+/);
    expect(missing.message).toContain('(Could not locate the bindings file. Tried:)');
    expect(missing.message).toContain(`run "npm rebuild better-sqlite3" in ${ROOT}, with install scripts allowed`);
    // After a Node upgrade: the module is there, for another ABI.
    const abi = openError('the store', '/d/svc.db', new Error("The module '/x/better_sqlite3.node'\nwas compiled against a different Node.js version using\nNODE_MODULE_VERSION 127. This version of Node.js requires\nNODE_MODULE_VERSION 115."));
    expect(abi.message).toContain("native module is missing or built for another Node.js");
    // A file problem keeps its own message and hint.
    const perm = openError('the store', '/d/svc.db', Object.assign(new Error('unable to open database file'), { code: 'SQLITE_CANTOPEN' }));
    expect(perm.message).toBe('cannot open the store /d/svc.db: unable to open database file (can this user read and write the file and the directory it is in?)');
  });
});

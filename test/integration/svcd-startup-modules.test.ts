/**
 * svcd answers --help, --version, a usage error and a config error before it loads the kernel
 * and the gateway (docs/design.md "svcd checks its flags and config before it loads what
 * serves"): those loaded first cost ~0.3 s of every such answer, paid by every script checking
 * its flags and by the tests of svcd's refusals.
 * Structural, not timed: a loader hook in the child lists the modules it loaded
 * (test/helpers/load-log.mjs), as test/gateway/mcp-lazy-load.test.ts does for the MCP SDK.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, tempDir } from '../helpers/daemon.js';
import { loadLogged, modulesIn, svcdServingModules } from '../helpers/loaded-modules.js';

/** Runs svcd with `args` to its exit; its status and the repository files it loaded. */
function svcdRun(args: string[]): { status: number | null; stderr: string; modules: string[] } {
  const dir = tempDir('svcd-modules-');
  const log = join(dir, 'loaded.txt');
  const { execArgs, env } = loadLogged(log);
  const r = spawnSync(process.execPath, [...execArgs, join(ROOT, 'dist/daemon/main.js'), ...args], { cwd: dir, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, stderr: r.stderr, modules: modulesIn(log) };
}

/**
 * What serving loads: the HTTP server, the kernel, the gateway. (better-sqlite3 is not in the
 * list: `svcd backup` and `restore` use it, and loading it is a few milliseconds.)
 */
const serving = (modules: string[]) =>
  modules.filter((m) => m === 'dist/daemon/server.js' || m.startsWith('dist/daemon/kernel/') || m.startsWith('dist/src/gateway/gateway') || m.startsWith('node_modules/fastify/'));

describe('svcd loads the kernel and the gateway only to serve (svcd(8), decisions §11 exit status)', () => {
  it('--version and --help exit 0 without them', () => {
    for (const args of [['--version'], ['--help']]) {
      const r = svcdRun(args);
      expect(r.status, r.stderr).toBe(0);
      expect(r.modules).toContain('dist/daemon/svcd.js');
      expect(serving(r.modules)).toEqual([]);
    }
  });

  it('a usage error (2) and a config error (1) exit without them', () => {
    const usage = svcdRun(['--log-level', 'loud']);
    expect(usage.status).toBe(2);
    expect(serving(usage.modules)).toEqual([]);
    const dir = tempDir('svcd-modules-config-');
    writeFileSync(join(dir, 'svcd.yaml'), 'kernel:\n  listen: 7401\n');
    const config = svcdRun(['--config', join(dir, 'svcd.yaml')]);
    expect(config.status).toBe(1);
    expect(config.stderr).toContain('svcd: ');
    expect(serving(config.modules)).toEqual([]);
  });

  it('serving loads them (the list above is not empty by construction)', async () => {
    const modules = await svcdServingModules([]);
    expect(serving(modules)).toContain('dist/daemon/server.js');
    expect(serving(modules)).toContain('dist/daemon/kernel/plugin.js');
    expect(serving(modules).some((m) => m.startsWith('node_modules/fastify/'))).toBe(true);
  });

  it('a gateway apart (--no-kernel) loads no run engine, a kernel apart (--no-gateway) no gateway (svcd(8))', async () => {
    const gatewayOnly = await svcdServingModules(['--no-kernel']);
    expect(gatewayOnly).toContain('dist/src/gateway/gateway.js');
    expect(gatewayOnly).not.toContain('dist/src/kernel/kernel.js');
    expect(gatewayOnly).not.toContain('dist/daemon/app.js');
    expect(gatewayOnly.filter((m) => m.startsWith('node_modules/@marcbachmann/cel-js/'))).toEqual([]); // the policy engine
    const kernelOnly = await svcdServingModules(['--no-gateway']);
    expect(kernelOnly).toContain('dist/src/kernel/kernel.js');
    expect(kernelOnly).not.toContain('dist/src/gateway/gateway.js');
    expect(kernelOnly).not.toContain('dist/daemon/gateway/app.js');
  });
});

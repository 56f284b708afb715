/**
 * A gateway with no mcp connector loads no MCP SDK (docs/design.md "svcd start-up"): the SDK
 * and zod are ~150 ms of every svcd start, paid before only because the gateway imported the
 * mcp connector, and the record of server groups read at start imported the stdio transport.
 * Structural, not timed: the modules the built svcd loads are listed by a loader hook in the
 * child process (test/helpers/load-log.mjs), as test/cli/startup-modules.test.ts does for svc.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, tempDir } from '../helpers/daemon.js';

/** The modules a svcd serving the gateway config `config` loaded up to its ready line. */
async function svcdModules(config: string): Promise<string[]> {
  const dir = tempDir('svcd-lazy-');
  const log = join(dir, 'loaded.txt');
  writeFileSync(join(dir, 'gateway.yaml'), config);
  const child = spawn(
    process.execPath,
    ['--import', join(ROOT, 'test/helpers/load-log.mjs'), join(ROOT, 'dist/daemon/main.js'), '--data-dir', join(dir, 'data'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', '--gateway-config', join(dir, 'gateway.yaml')],
    { env: { ...process.env, SVC_TEST_LOAD_LOG: log }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const ready = await new Promise<boolean>((resolve) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('"gateway":"http')) resolve(true);
    });
    child.on('exit', () => resolve(false));
  });
  expect(ready, err || out).toBe(true);
  child.kill('SIGTERM');
  await new Promise((r) => child.on('exit', r));
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((u) => u.startsWith('file://'))
    .map((u) => decodeURIComponent(new URL(u).pathname).slice(ROOT.length + 1));
}

const sdk = (modules: string[]) => modules.filter((m) => m.startsWith('node_modules/@modelcontextprotocol/') || m.startsWith('node_modules/zod/'));

describe('svcd loads the MCP SDK only for a gateway with an mcp connector (svc-gateway(5))', () => {
  it('a gateway of sqlite, http and fs connectors starts without it', async () => {
    const dir = tempDir('svcd-lazy-fs-');
    const modules = await svcdModules(`connectors:\n  - name: files\n    type: fs\n    root: ${dir}\n`);
    expect(modules).toContain('dist/src/gateway/gateway.js');
    expect(modules).not.toContain('dist/src/gateway/connectors/mcp.js');
    expect(sdk(modules)).toEqual([]);
  });
});

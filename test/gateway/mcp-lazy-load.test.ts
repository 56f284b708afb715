/**
 * A gateway with no mcp connector loads no MCP SDK (docs/design.md "svcd loads the MCP SDK only for an mcp connector"): the SDK
 * and zod are ~150 ms of every svcd start, paid before only because the gateway imported the
 * mcp connector, and the record of server groups read at start imported the stdio transport.
 * Structural, not timed: the modules the built svcd loads are listed by a loader hook in the
 * child process (test/helpers/load-log.mjs), as test/cli/startup-modules.test.ts does for svc.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/daemon.js';
import { svcdServingModules } from '../helpers/loaded-modules.js';

/** The modules a svcd serving the gateway config `config` loaded up to its ready line. */
async function svcdModules(config: string): Promise<string[]> {
  const file = join(tempDir('svcd-lazy-'), 'gateway.yaml');
  writeFileSync(file, config);
  return svcdServingModules(['--gateway-config', file]);
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

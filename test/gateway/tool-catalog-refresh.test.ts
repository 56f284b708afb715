// docs/design.md "Lease context": the kernel asks for a step's tool descriptors before it
// commits the lease (warmToolDescriptors), then builds the context from what the catalog
// keeps. A gateway that drops packets times the first fetch out; the describe after the
// commit must not start a second fetch and wait out its timeout inside the lease's ttl.
import { createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { HttpToolCatalog } from '../../src/gateway/tool-catalog.js';

describe('HttpToolCatalog against a gateway that never answers', () => {
  it('a describe right after a fetch that timed out does not fetch again (minRefreshMs counts from its end)', async () => {
    const sockets: Socket[] = [];
    const blackHole = createServer((s) => void sockets.push(s)); // takes the connection, never answers
    await new Promise<void>((r) => blackHole.listen(0, '127.0.0.1', () => r()));
    try {
      const { port } = blackHole.address() as { port: number };
      const catalog = new HttpToolCatalog({ gatewayUrl: `http://127.0.0.1:${port}`, token: null, timeoutMs: 300, minRefreshMs: 300 });
      expect(await catalog.describe('billing.lookup')).toBeNull(); // the warm before the commit
      expect(await catalog.describe('billing.lookup')).toBeNull(); // the context after it
      expect(sockets).toHaveLength(1);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => blackHole.close(() => r()));
    }
  });
});

/**
 * Gateway overhead: `test.echo` and a sqlite select through POST /v1/tools/call against the
 * same upstream called directly in-process, with the remit-verification cache warm and cold.
 * Each call carries a fresh idempotency key and is audited with a `tool.called` event on a
 * real run, as a worker's call is.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startSvcd } from '../daemon/server.js';
import { createBillingDb } from '../quickstart/billing-db.js';
import { loadGatewayConfig } from '../src/gateway/config.js';
import { silentLogger } from '../src/log/logger.js';
import { clearVerifiedTokenCache } from '../src/remit/verify.js';
import { latencies, type Benchmark, type Row } from './lib/harness.js';
import { httpJson } from './lib/http.js';
import { median } from './lib/stats.js';
import { BENCH_BUNDLE, REQUESTER } from './lib/kernel-fixture.js';
import { canonicalJson } from '../src/encoding/canonical-json.js';
import { encodeBase64url } from '../src/encoding/base64url.js';
import { generateKeyPair, signBytes } from '../src/keys/ed25519.js';

const LOOKUP = 'SELECT i.id AS invoice_id, i.total, c.email FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.id = :invoice_id';

function overheadRow(label: string, through: number[], direct: number[]): Row {
  const base = median(direct);
  return { label, unit: 'ms', samples: through.map((t) => t - base), better: 'lower', target: { medianAtMost: 1, note: 'p50 < 1 ms' } };
}

export const gatewayBenchmark: Benchmark = {
  name: 'gateway',
  description: 'POST /tools/call overhead over the direct upstream (test.echo, sqlite select), remit cache warm and cold',
  async run(ctx): Promise<Row[]> {
    const n = ctx.quick ? 300 : 2000;
    const dir = mkdtempSync(join(tmpdir(), 'svc-bench-gateway-'));
    const dbPath = createBillingDb(join(dir, 'billing.db'));
    const config = loadGatewayConfig(
      {
        listen: '127.0.0.1:0',
        data_dir: join(dir, 'gateway-data'),
        connectors: [{ name: 'billing', type: 'sqlite', path: dbPath, tools: { lookup: { description: 'invoice by id', writes: false, statement: LOOKUP, input_schema: { type: 'object', required: ['invoice_id'], properties: { invoice_id: { type: 'string' } } }, contract: { required: { rows: 'list' } } } } }],
      },
      { env: { ...process.env, SVC_GATEWAY_TEST_TOOLS: '1' }, baseDir: dir },
    );
    const pub = generateKeyPair();
    const d = await startSvcd({
      logger: silentLogger,
      token: null,
      kernel: { dataDir: join(dir, 'kernel'), listen: '127.0.0.1:0', publishers: [`bench-publisher:${encodeBase64url(pub.publicKey)}`] },
      gateway: { config, listen: '127.0.0.1:0', canaryLoop: false },
    });
    try {
      const k = `${d.kernelUrl}/v1`;
      const g = `${d.gatewayUrl}/v1`;
      const signature = encodeBase64url(signBytes(pub.seed, Buffer.from(canonicalJson(BENCH_BUNDLE))));
      const b = await httpJson('POST', `${k}/bundles`, { bundle: BENCH_BUNDLE, signature: { key_id: 'bench-publisher', signature } });
      const remit = await httpJson('POST', `${k}/remits`, { tools: ['test.*', 'billing.*'], scopes: ['test:*', 'sql:table:*'], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER });
      const run = await httpJson('POST', `${k}/runs`, { bundle_id: b.body.bundle_id, workflow: 'cycle', input: { i: 1 }, remit_id: remit.body.remit_id, requested_by: REQUESTER });
      const lease = await httpJson('POST', `${k}/leases`, { worker_id: 'bench', kinds: ['tool'], ttl_seconds: 3600 });
      if (lease.status !== 200) throw new Error(`setup failed: ${JSON.stringify([b.body, remit.body, run.body, lease.body])}`);
      const token = lease.body.context.remit_token as string;
      const runId = run.body.run_id as string;
      let seq = 0;
      const call = async (tool: string, args: Record<string, unknown>) => {
        const r = await httpJson('POST', `${g}/tools/call`, { remit_token: token, run_id: runId, step: 'only', lease_id: lease.body.lease_id, tool, args, idempotency_key: `bench-${seq++}`, scope: null });
        if (r.status !== 200) throw new Error(`${tool} failed: ${r.status} ${JSON.stringify(r.body)}`);
      };

      const echo = d.gateway!.connectors.get('test')!;
      const rows: Row[] = [];
      const directEcho = await latencies(n, async () => void (await echo.call('echo', { hello: 'world' }, { signal: new AbortController().signal } as never)));
      rows.push({ label: 'test.echo direct', unit: 'ms', samples: directEcho, better: 'lower' });
      const warmEcho = await latencies(n, () => call('test.echo', { hello: 'world' }));
      rows.push({ label: 'test.echo via gateway (cache warm)', unit: 'ms', samples: warmEcho, better: 'lower', baseline: 'test.echo direct' });
      const coldEcho = await latencies(n, async () => {
        clearVerifiedTokenCache();
        await call('test.echo', { hello: 'world' });
      });
      rows.push({ label: 'test.echo via gateway (cache cold)', unit: 'ms', samples: coldEcho, better: 'lower', baseline: 'test.echo direct' });

      const raw = new Database(dbPath, { readonly: true });
      const stmt = raw.prepare(LOOKUP);
      const directSql = await latencies(n, async () => void stmt.all({ invoice_id: 'inv_1001' }));
      raw.close();
      rows.push({ label: 'sqlite select direct', unit: 'ms', samples: directSql, better: 'lower' });
      const warmSql = await latencies(n, () => call('billing.lookup', { invoice_id: 'inv_1001' }));
      rows.push({ label: 'sqlite select via gateway (cache warm)', unit: 'ms', samples: warmSql, better: 'lower', baseline: 'sqlite select direct' });
      const coldSql = await latencies(n, async () => {
        clearVerifiedTokenCache();
        await call('billing.lookup', { invoice_id: 'inv_1001' });
      });
      rows.push({ label: 'sqlite select via gateway (cache cold)', unit: 'ms', samples: coldSql, better: 'lower', baseline: 'sqlite select direct' });

      rows.push(overheadRow('overhead test.echo (warm)', warmEcho, directEcho));
      rows.push(overheadRow('overhead test.echo (cold)', coldEcho, directEcho));
      rows.push(overheadRow('overhead sqlite select (warm)', warmSql, directSql));
      rows.push(overheadRow('overhead sqlite select (cold)', coldSql, directSql));
      return rows;
    } finally {
      await d.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

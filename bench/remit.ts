/**
 * Remit tokens: mint (sign), derive and verify per second through node:crypto — svc's hot
 * path — side by side with @noble/ed25519 (the ratio is node:crypto ÷ noble), plus
 * verification with the verified-token cache warm. Derive goes through the remit service
 * (narrowing checks, spend reservation, signing) on an in-memory store, so the disk is not
 * what it measures.
 */
import { createHash } from 'node:crypto';
import * as noble from '@noble/ed25519';
import { generateKeyPair, privateKeyObject, signBytes } from '../src/keys/ed25519.js';
import { controlPlaneKeyId } from '../src/keys/keyring.js';
import { systemClock } from '../src/clock.js';
import { RemitService } from '../src/remit/remit-service.js';
import { REMIT_MIGRATIONS } from '../src/remit/schema.js';
import { decodeToken, encodeToken, type TokenSigner } from '../src/remit/token.js';
import { migrate, SqliteDb } from '../src/store/sqlite-db.js';
import { clearVerifiedTokenCache, verifyRemit } from '../src/remit/verify.js';
import type { RemitPayload, TrustedKeys } from '../src/types.js';
import { throughput, type Benchmark, type Row } from './lib/harness.js';

noble.hashes.sha512 = (m: Uint8Array) => createHash('sha512').update(m).digest();

const PARENT = {
  tools: ['billing.*', 'crm.lookup'],
  scopes: ['sql:table:*', 'http:host:api.example.com'],
  grants: ['pii', 'finance'],
  spend: { tokens: 1_000_000_000, usd: 1_000_000 },
  autonomy: 'supervised',
  ttl_seconds: 3600,
  policy_set: ['refunds'],
  requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' },
};
/** A typical narrowing: fewer tools, one table, no finance data, a small budget. */
const CHILD = { tools: ['billing.lookup_invoice'], scopes: ['sql:table:invoices'], grants: ['pii'], spend: { tokens: 1, usd: 0.0001 }, ttl_seconds: 600 };

/** `derive` calls per second through a remit service signing with `keys`. */
async function deriveRate(keys: TokenSigner & TrustedKeys, rounds: number, n: number): Promise<number[]> {
  const db = new SqliteDb({ path: ':memory:' });
  try {
    await migrate(db, REMIT_MIGRATIONS);
    const svc = new RemitService({ db, keys, clock: systemClock, options: {} });
    const parent = await svc.mint(PARENT);
    return await throughput(rounds, n, async () => {
      for (let i = 0; i < n; i++) await svc.derive(parent.remit_id, CHILD);
    });
  } finally {
    await db.close();
  }
}

export const remitBenchmark: Benchmark = {
  name: 'remit',
  description: 'remit mint, derive and verify per second, node:crypto vs @noble/ed25519, cache cold and warm',
  async run(ctx): Promise<Row[]> {
    const n = ctx.quick ? 500 : 3000;
    const pair = generateKeyPair();
    const keyId = controlPlaneKeyId(pair.publicKey);
    const keys = { lookup: (id: string) => (id === keyId ? pair.publicKey : null) };
    const now = Math.floor(Date.now() / 1000);
    const payload = (i: number): RemitPayload => ({
      rid: `rmt_bench${i}`,
      iss: keyId,
      iat: now,
      nbf: now,
      exp: now + 3600,
      tools: ['billing.*', 'crm.lookup'],
      scopes: ['sql:table:*'],
      grants: ['pii'],
      spend: { tokens: 100000, usd: 5 },
      autonomy: 'supervised',
      policy_set: ['refunds'],
      requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' },
    });
    const signingKey = privateKeyObject(pair.seed); // as KeyRing holds it: parsed once
    const nodeSigner = { keyId, sign: (m: Uint8Array) => signBytes(signingKey, m) };
    const nobleSigner = { keyId, sign: (m: Uint8Array) => noble.sign(m, pair.seed) };
    const payloads = Array.from({ length: n }, (_, i) => payload(i));
    const tokens = payloads.map((p) => encodeToken(p, nodeSigner));
    const call = { run_id: undefined, tool: 'billing.refund', scopes: ['sql:table:invoices'], writes: true };

    const rows: Row[] = [];
    rows.push({ label: 'mint (noble)', unit: 'ops/s', better: 'higher', samples: await throughput(ctx.rounds, n, async () => void payloads.forEach((p) => encodeToken(p, nobleSigner))) });
    rows.push({ label: 'mint (node:crypto)', unit: 'ops/s', better: 'higher', baseline: 'mint (noble)', samples: await throughput(ctx.rounds, n, async () => void payloads.forEach((p) => encodeToken(p, nodeSigner))) });
    const trusted = { lookup: keys.lookup };
    rows.push({ label: 'derive (noble)', unit: 'ops/s', better: 'higher', samples: await deriveRate({ ...nobleSigner, ...trusted }, ctx.rounds, n) });
    rows.push({ label: 'derive (node:crypto)', unit: 'ops/s', better: 'higher', baseline: 'derive (noble)', samples: await deriveRate({ ...nodeSigner, ...trusted }, ctx.rounds, n) });
    rows.push({
      label: 'verify (noble)',
      unit: 'ops/s',
      better: 'higher',
      samples: await throughput(ctx.rounds, n, async () => {
        for (const t of tokens) {
          const d = decodeToken(t);
          if (!d.ok || !noble.verify(d.signature, d.payloadBytes, pair.publicKey)) throw new Error('noble verify failed');
        }
      }),
    });
    rows.push({
      label: 'verify cold (node:crypto)',
      unit: 'ops/s',
      better: 'higher',
      baseline: 'verify (noble)',
      samples: await throughput(
        ctx.rounds,
        n,
        async () => {
          for (const t of tokens) if (!verifyRemit(t, keys, now, call).ok) throw new Error('verify failed');
        },
        async () => clearVerifiedTokenCache(),
      ),
    });
    rows.push({
      label: 'verify warm (cache)',
      unit: 'ops/s',
      better: 'higher',
      baseline: 'verify cold (node:crypto)',
      samples: await throughput(ctx.rounds, n, async () => {
        for (const t of tokens) if (!verifyRemit(t, keys, now, call).ok) throw new Error('verify failed');
      }),
    });
    return rows;
  },
};

/**
 * Replay: events per second verified for one run of 100,000 events (read from SQLite, every
 * hash and link recomputed, the signed head checked, the reducer folded, the state compared),
 * against the bare hash-chain recomputation over the same events in memory (the ceiling).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canonicalJson } from '../src/encoding/canonical-json.js';
import { encodeBase64url } from '../src/encoding/base64url.js';
import { eventHash } from '../src/events/event-hash.js';
import { Kernel } from '../src/kernel/kernel.js';
import { generateKeyPair, signBytes } from '../src/keys/ed25519.js';
import { silentLogger } from '../src/log/logger.js';
import type { RunEvent } from '../src/types.js';
import { throughput, type Benchmark, type Row } from './lib/harness.js';
import { BENCH_BUNDLE, REQUESTER } from './lib/kernel-fixture.js';

export const replayBenchmark: Benchmark = {
  name: 'replay',
  description: 'events per second verified by replay (hash chain + reducer) for a run of 100,000 events',
  async run(ctx): Promise<Row[]> {
    const total = ctx.quick ? 20_000 : 100_000;
    const dir = mkdtempSync(join(tmpdir(), 'svc-bench-replay-'));
    const pub = generateKeyPair();
    // Setup only: NORMAL so that writing the log does not take minutes of fsyncs.
    const kernel = await Kernel.open({ dataDir: dir, synchronous: 'NORMAL', logger: silentLogger, publishers: [`bench-publisher:${encodeBase64url(pub.publicKey)}`] });
    try {
      const signature = encodeBase64url(signBytes(pub.seed, Buffer.from(canonicalJson(BENCH_BUNDLE))));
      const b = await kernel.bundles.post({ bundle: BENCH_BUNDLE, signature: { key_id: 'bench-publisher', signature } });
      const remit = await kernel.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 1, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER });
      const { run_id } = await kernel.runs.create({ bundle_id: b.bundle_id, workflow: 'cycle', input: { i: 1 }, remit_id: remit.remit_id, requested_by: REQUESTER });
      ctx.log(`writing ${total} events`);
      while (((await kernel.runs.get(run_id)).last_seq as number) < total) {
        await kernel.runs.appendExternalEvent(run_id, { kind: 'note', payload: { text: 'checked invoice inv_1001', class: 'pii', count: 1 }, actor: { worker: 'bench' } });
      }
      const events: RunEvent[] = [];
      for (let from = 1; ; ) {
        const page = await kernel.runs.events(run_id, from, 1000);
        events.push(...(page.events as RunEvent[]));
        if (page.events.length < 1000) break;
        from = page.next_seq as number;
      }
      const rows: Row[] = [];
      rows.push({
        label: 'hash chain only (in memory)',
        unit: 'events/s',
        better: 'higher',
        samples: await throughput(ctx.rounds, events.length, async () => {
          let prev = '';
          for (const e of events) {
            if (eventHash(run_id, { seq: e.seq, prev_hash: prev, kind: e.kind, payload: e.payload, actor: e.actor, at: e.at }) !== e.hash) throw new Error(`hash mismatch at ${e.seq}`);
            prev = e.hash;
          }
        }),
      });
      rows.push({
        label: `replay (${events.length} events)`,
        unit: 'events/s',
        better: 'higher',
        baseline: 'hash chain only (in memory)',
        target: { medianAtLeast: 100_000, note: '≥ 100,000 events/s' },
        samples: await throughput(ctx.rounds, events.length, async () => {
          const r = await kernel.runs.replay(run_id);
          if (!r.chain_valid || !r.state_matches) throw new Error(`replay did not check out: ${JSON.stringify(r.chain_errors.slice(0, 3))}`);
        }),
      });
      return rows;
    } finally {
      await kernel.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

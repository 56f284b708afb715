/**
 * Legacy remit bindings (docs/design.md "Upgrades and downgrades"): a remit this build bound,
 * then bound again by an svcd from before remits-003 (which looks only at the remits row), is
 * named in a warning at start; the binding this build made stays the remit's.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import { Kernel } from '../../src/kernel/kernel.js';
import { silentLogger } from '../../src/log/logger.js';
import { SqliteDb } from '../../src/store/sqlite-db.js';
import { tempDir } from '../helpers/daemon.js';

const REQUESTER = { id: 'ana', role: 'agent', manager: 'lead' };
const BUNDLE = { name: 'b', version: '1.0.0', department: 'ops', tools: { 'test.echo': { writes: false } }, workflows: { one: { input_schema: { type: 'object' }, steps: [{ id: 'a', kind: 'tool', tool: 'test.echo', args: {} }] } } };

describe('a remit an old svcd bound a second time (already bound here, then bound again by a build before remits-003)', () => {
  it('is named at start, not passed over in silence', async () => {
    const dataDir = join(tempDir('svc-adopt-conflict-'), 'k');
    const pub = generateKeyPair();
    const publishers = [`p:${encodeBase64url(pub.publicKey)}`];
    const first = await Kernel.open({ dataDir, logger: silentLogger, publishers });
    const { bundle_id } = await first.bundles.post({ bundle: BUNDLE, signature: { key_id: 'p', signature: encodeBase64url(signBytes(pub.seed, Buffer.from(canonicalJson(BUNDLE)))) } });
    const remit = await first.remits.mint({ tools: ['test.*'], scopes: ['test:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 3600, policy_set: [], requested_by: REQUESTER });
    await first.runs.create({ bundle_id, workflow: 'one', input: {}, remit_id: remit.remit_id, requested_by: REQUESTER });
    await first.close();
    // The old build sees remits.run_id NULL, takes the remit as unbound and binds it to its own run.
    const db = new SqliteDb({ path: join(dataDir, 'kernel.db') });
    await db.run(`UPDATE remits SET run_id = 'run_second', bound_payload = json_set(payload, '$.run', 'run_second'), bound_token = 't', bound_at = created_at WHERE remit_id = ?`, [remit.remit_id]);
    await db.close();
    const warnings: unknown[] = [];
    const again = await Kernel.open({ dataDir, logger: { ...silentLogger, warn: (msg: string, fields?: unknown) => warnings.push([msg, fields]) }, publishers });
    await again.close();
    expect(warnings).toEqual([
      ['an older svcd bound a remit already bound to another run; check that run by hand', { remit_id: remit.remit_id, run_id: expect.stringMatching(/^run_/), legacy_run_id: 'run_second' }],
    ]);
  });
});

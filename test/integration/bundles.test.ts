/**
 * /v1/bundles through a real svcd (interface 2.2, 4.1 rule 1, 7.1; decisions 4, 10):
 * signatures against trusted publishers, content-addressed ids, 200/201/409, list and get,
 * every error code of the endpoint.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { bundleId, signBundle, type PublisherKeyFile } from '../../src/bundle/sign.js';
import { generatePublisherKey } from '../../src/keys/publishers.js';
import { ROOT, startTestDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';

const demo = JSON.parse(readFileSync(join(ROOT, 'fixtures/keys/demo-publisher.json'), 'utf8')) as PublisherKeyFile;
const refunds = () => parse(readFileSync(join(ROOT, 'fixtures/bundles/refunds.yaml'), 'utf8'));
const signed = (bundle: unknown, key: PublisherKeyFile = demo) => ({ bundle, signature: signBundle(bundle, key) });
const daemon = () => startTestDaemon({ kernel: { publishers: [`${demo.key_id}:${demo.public_key}`] } });

describe('POST /v1/bundles (I 4.1, D 4)', () => {
  it("accepts decisions 4's sample bundle as written (201)", async () => {
    await using d = await daemon();
    const sample = parse(readFileSync(join(ROOT, 'fixtures/bundles/decisions-example.yaml'), 'utf8'));
    const r = await d.kernel_('/bundles', { body: signed(sample) });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toEqual({ bundle_id: bundleId(sample), name: 'refunds', version: '1.2.0' });
  });

  it('stores a signed bundle (201), finds it again on an identical re-post (200), refuses other content (409)', async () => {
    await using d = await daemon();
    const b = refunds();
    const first = await d.kernel_('/bundles', { body: signed(b) });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ bundle_id: bundleId(b), name: 'refunds', version: '1.0.0' });
    expect(first.body.bundle_id).toMatch(/^bnd_[0-9a-f]{26}$/);

    // Same content, members in another order: same JCS, same id, 200.
    const reordered = Object.fromEntries(Object.entries(b).reverse());
    const again = await d.kernel_('/bundles', { body: signed(reordered) });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);

    const changed = { ...b, description: 'something else' };
    const conflict = await d.kernel_('/bundles', { body: signed(changed) });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error).toMatchObject({ code: 'bundle_version_exists', details: { name: 'refunds', version: '1.0.0', bundle_id: first.body.bundle_id } });

    const next = await d.kernel_('/bundles', { body: signed({ ...changed, version: '1.1.0' }) });
    expect(next.status).toBe(201);
    expect(next.body.bundle_id).not.toBe(first.body.bundle_id);
  });

  it('refuses unsigned bundles, unknown keys and signatures that do not verify (422 bundle_signature_invalid)', async () => {
    await using d = await daemon();
    const b = refunds();
    const stranger = { ...generatePublisherKey(), key_id: 'stranger' };
    const good = signBundle(b, demo);
    const cases: unknown[] = [
      { bundle: b },
      { bundle: b, signature: null },
      { bundle: b, signature: { key_id: 'demo-publisher' } },
      { bundle: b, signature: {} },
      signed(b, stranger),
      { bundle: { ...b, description: 'tampered' }, signature: good },
      { bundle: b, signature: { key_id: 'demo-publisher', signature: signBundle(b, { ...stranger, key_id: 'demo-publisher' }).signature } },
    ];
    for (const body of cases) {
      const res = await d.kernel_('/bundles', { body });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('bundle_signature_invalid');
    }
    // An unknown key says how svcd comes to trust one.
    expect((await d.kernel_('/bundles', { body: signed(b, stranger) })).body.error.message).toBe(
      'key stranger is not a trusted publisher key (svcd trusts the keys given as --publisher KEY_ID:PUBLIC_KEY or in kernel.publishers)',
    );
    expect((await d.kernel_('/bundles')).body.bundles).toEqual([]);
  });

  it('answers a signature member of the wrong type with 400 request_invalid and its path (D §10), like any wrong type', async () => {
    await using d = await daemon();
    const b = refunds();
    const good = signBundle(b, demo);
    const cases: Array<[unknown, string]> = [
      [{ key_id: 7, signature: good.signature }, '/signature/key_id'],
      [{ key_id: good.key_id, signature: 5 }, '/signature/signature'],
      ['krt1.not.an.object', '/signature'],
      [[good.key_id, good.signature], '/signature'],
    ];
    for (const [signature, path] of cases) {
      const res = await d.kernel_('/bundles', { body: { bundle: b, signature } });
      expect([path, res.status]).toEqual([path, 400]);
      expect(res.body.error).toMatchObject({ code: 'request_invalid', details: { path } });
    }
    expect((await d.kernel_('/bundles')).body.bundles).toEqual([]);
  });

  it('checks the signature before the content: an unsigned invalid bundle reveals nothing', async () => {
    await using d = await daemon();
    const res = await d.kernel_('/bundles', { body: { bundle: { name: 'Nope' } } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('bundle_signature_invalid');
  });

  it('refuses an invalid bundle with every problem and the first one in details.path (422 bundle_invalid)', async () => {
    await using d = await daemon();
    const b = refunds();
    b.version = '1.0';
    b.workflows.refund.steps[2].args.amount = '{{steps.nope.output.amount}}';
    b.workflows.refund.steps[1].prompt = 'missing';
    const res = await d.kernel_('/bundles', { body: signed(b) });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('bundle_invalid');
    expect(res.body.error.details.path).toBe('/version');
    expect(res.body.error.details.problems).toEqual([
      { path: '/version', message: 'must be a semantic version such as 1.2.0' },
      { path: '/workflows/refund/steps/1/prompt', message: 'unknown prompt "missing" (prompts: triage)' },
      { path: '/workflows/refund/steps/2/args/amount', message: 'template {{steps.nope.output.amount}} names no step of workflow "refund"' },
    ]);
    expect(res.body.error.message).toMatch(/^\/version: .*\(and 2 more\)$/);
  });

  it('answers bad bodies with 400 request_invalid and a path', async () => {
    await using d = await daemon();
    const notJson = await d.kernel_('/bundles', { method: 'POST', body: '{"bundle": ' });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBe('request_invalid');
    const missing = await d.kernel_('/bundles', { body: { signature: { key_id: 'x', signature: 'y' } } });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/bundle' } });
    const wrongType = await d.kernel_('/bundles', { body: { bundle: 'refunds', signature: { key_id: 'x', signature: 'y' } } });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/bundle' } });
    const array = await d.kernel_('/bundles', { body: [1, 2] });
    expect(array.status).toBe(400);
    expect(array.body.error.code).toBe('request_invalid');
  });

  it('accepts bodies over 1 MiB and refuses those over 8 MiB (D 10)', async () => {
    await using d = await daemon();
    const big = refunds();
    big.prompts.a = 'x'.repeat(900_000);
    big.prompts.b = 'y'.repeat(900_000);
    big.version = '2.0.0';
    const ok = await d.kernel_('/bundles', { body: signed(big) });
    expect(ok.status).toBe(201);
    const huge = await d.kernel_('/bundles', { method: 'POST', body: JSON.stringify({ bundle: { pad: 'z'.repeat(8 * 1024 * 1024) } }) });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe('payload_too_large');
    // Other routes keep the 1 MiB limit.
    const policy = await d.kernel_('/policies', { method: 'POST', body: JSON.stringify({ name: 'p', version: '1', source: 'q'.repeat(1_100_000) }) });
    expect(policy.status).toBe(413);
  });
});

describe('GET /v1/bundles and /v1/bundles/{id} (I 4.1)', () => {
  it('lists summaries and returns the stored bundle with its signature', async () => {
    await using d = await daemon();
    const b = refunds();
    const body = signed(b);
    const posted = (await d.kernel_('/bundles', { body })).body;
    const list = await d.kernel_('/bundles');
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      bundles: [
        {
          bundle_id: posted.bundle_id,
          name: 'refunds',
          version: '1.0.0',
          description: b.description,
          workflows: ['refund'],
          key_id: 'demo-publisher',
          created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        },
      ],
    });
    const got = await d.kernel_(`/bundles/${posted.bundle_id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ bundle_id: posted.bundle_id, name: 'refunds', version: '1.0.0', bundle: b, signature: body.signature, created_at: list.body.bundles[0].created_at });

    const stored = await d.kernel!.bundles.get(posted.bundle_id);
    expect(Object.isFrozen(stored.bundle.workflows)).toBe(true);
  });

  it('answers an unknown id with 404 not_found, resource bundle', async () => {
    await using d = await daemon();
    const res = await d.kernel_('/bundles/bnd_00000000000000000000000000');
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({ code: 'not_found', details: { resource: 'bundle', id: 'bnd_00000000000000000000000000' } });
  });

  it('with no publishers configured every bundle is refused', async () => {
    await using d = await startTestDaemon();
    const res = await d.kernel_('/bundles', { body: signed(refunds()) });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('bundle_signature_invalid');
  });
});

describe('a publisher dropped from the config (I 9: "Bundles are trusted by signature from publisher keys")', () => {
  it('stops its bundles from starting runs after a restart; a run already going is left alone', async () => {
    const dataDir = tempDir();
    const other = generatePublisherKey();
    const requested_by = { id: 'ana', role: 'agent', manager: 'lead' };
    const remit = { tools: ['billing.*'], scopes: ['billing:*'], grants: [], spend: { tokens: 10, usd: 1 }, autonomy: 'autonomous', ttl_seconds: 600, policy_set: [], requested_by };
    const startRun = async (d: TestDaemon, bundle_id: string) => {
      const r = await d.kernel_('/remits', { body: remit });
      return d.kernel_('/runs', { body: { bundle_id, workflow: 'refund', input: { ticket_id: 't-1', customer_id: 'c-1', invoice_id: 'inv_1', message: 'charged twice' }, remit_id: r.body.remit_id, requested_by } });
    };
    // Each start keeps the store: stopped with close(), not disposed (which removes the directory).
    const start = (publishers: string[]) => startTestDaemon({ kernel: { dataDir, publishers } });
    try {
      const first = await start([`${demo.key_id}:${demo.public_key}`]);
      const bundle = (await first.kernel_('/bundles', { body: signed(refunds()) })).body.bundle_id as string;
      const run = await startRun(first, bundle);
      expect(run.status, JSON.stringify(run.body)).toBe(201);
      await first.close();

      for (const [publishers, why] of [
        [[`${other.key_id}:${other.public_key}`], /is no longer a trusted publisher key/],
        [[`${demo.key_id}:${other.public_key}`], /no longer verifies under key/],
      ] as const) {
        const d = await start([...publishers]);
        const refused = await startRun(d, bundle);
        expect(refused.status).toBe(422);
        expect(refused.body.error).toMatchObject({ code: 'bundle_signature_invalid', details: { bundle_id: bundle, key_id: demo.key_id } });
        expect(refused.body.error.message).toMatch(why);
        // What the operator does about it (svc-bundle(5), trust): re-sign and push, or trust the
        // key again — only where it is untrusted: trusted under another public key, trusting
        // it "again" changes nothing.
        expect(refused.body.error.message).toContain('push it again signed with a trusted key (svc bundle push FILE --key KEYFILE: the new signature replaces this one)');
        if (why.source.includes('trusted')) expect(refused.body.error.message).toMatch(new RegExp(`replaces this one\\), or trust key ${demo.key_id} again \\(svcd --publisher\\)$`));
        else expect(refused.body.error.message).not.toContain('trust key');
        // The run started before goes on: its step is still handed out (once; then it is leased).
        expect((await d.kernel_(`/runs/${run.body.run_id}`)).body.state).toBe('running');
        if (why.source.includes('trusted')) {
          const l = await d.kernel_('/leases', { body: { worker_id: 'w', kinds: ['model', 'tool', 'action'], ttl_seconds: 30, wait_seconds: 0 } });
          expect(l.status).toBe(200);
          expect(l.body.run_id).toBe(run.body.run_id);
        }
        await d.close();
      }
      // Re-signed by a publisher trusted now: the identical re-post (200) takes the place of the
      // signature that no longer verifies, and its runs start; a later re-post under yet another
      // trusted key changes nothing (the first valid signature is kept).
      const third = generatePublisherKey();
      const resigned = await start([`${other.key_id}:${other.public_key}`, `${third.key_id}:${third.public_key}`]);
      const again = await resigned.kernel_('/bundles', { body: { bundle: refunds(), signature: signBundle(refunds(), other) } });
      expect(again.status).toBe(200);
      expect(again.body.bundle_id).toBe(bundle);
      expect((await startRun(resigned, bundle)).status).toBe(201);
      expect((await resigned.kernel_('/bundles', { body: { bundle: refunds(), signature: signBundle(refunds(), third) } })).status).toBe(200);
      expect((await resigned.kernel_(`/bundles/${bundle}`)).body.signature.key_id).toBe(other.key_id);
      await resigned.close();
      // Its stored signature is other's now: trusted beside the first publisher, runs start.
      const last = await start([`${demo.key_id}:${demo.public_key}`, `${other.key_id}:${other.public_key}`]);
      expect((await startRun(last, bundle)).status).toBe(201);
      await last.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

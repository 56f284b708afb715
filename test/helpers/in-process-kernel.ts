/**
 * A kernel in-process on a real SQLite file, with a manual clock and no periodic sweeper (so
 * expiry happens only where a test's operations put it), trusting one new publisher key, with
 * `bundle` posted signed by it. For tests that need the clock or an interleaving in hand.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { ManualClock } from '../../src/clock.js';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair, signBytes } from '../../src/keys/ed25519.js';
import { Kernel } from '../../src/kernel/kernel.js';
import { silentLogger } from '../../src/log/logger.js';
import { tempDir } from './daemon.js';
import { testPgStore } from './pg.js';

export interface InProcessKernel {
  kernel: Kernel;
  clock: ManualClock;
  bundleId: string;
  /** Closes the kernel and removes its directory. */
  close(): Promise<void>;
}

export async function openInProcessKernel(bundle: Record<string, unknown>, prefix = 'svc-kernel-'): Promise<InProcessKernel> {
  const dir = tempDir(prefix);
  const clock = new ManualClock();
  const pub = generateKeyPair();
  const pgStore = await testPgStore(); // SVC_TEST_STORE=postgres
  const kernel = await Kernel.open({ dataDir: join(dir, 'k'), clock, logger: silentLogger, sweepIntervalMs: 0, publishers: [`p:${encodeBase64url(pub.publicKey)}`], ...(pgStore?.options ?? {}) });
  const signature = { key_id: 'p', signature: encodeBase64url(signBytes(pub.seed, Buffer.from(canonicalJson(bundle)))) };
  const { bundle_id: bundleId } = await kernel.bundles.post({ bundle, signature });
  return {
    kernel,
    clock,
    bundleId,
    close: async () => {
      await kernel.close();
      await pgStore?.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

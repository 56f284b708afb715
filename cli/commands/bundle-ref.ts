/**
 * Bundle references (`bnd_…` or `NAME[@VERSION]`) resolved on the kernel. Apart from
 * cli/commands/bundle.ts, which re-exports it, so that `svc run start` does not load the YAML
 * parser and the bundle validator (docs/design.md, "CLI start-up").
 */
import { CliError, EXIT } from '../exit.js';
import { isListOfObjects, notSvcd, type SvcHttpClient } from '../http-client.js';

/** A bundle id from `bnd_…` or `NAME[@VERSION]` (the newest version of NAME when none is given). */
export async function resolveBundle(client: SvcHttpClient, ref: string): Promise<string> {
  if (ref.startsWith('bnd_')) return ref;
  const at = ref.lastIndexOf('@');
  const name = at > 0 ? ref.slice(0, at) : ref;
  const version = at > 0 ? ref.slice(at + 1) : null;
  const list = (await client.request<{ bundles: Array<{ bundle_id: string; name: string; version: string; created_at: string }> }>('GET', '/bundles', undefined, {}, ['bundles'])).body.bundles;
  if (!isListOfObjects(list)) throw notSvcd(200, client.opts.baseUrl);
  const matches = list.filter((b) => b.name === name && (version === null || b.version === version));
  if (matches.length === 0) {
    // With --json the body is the kernel's own envelope for an unknown bundle (decisions §10).
    const message = `no bundle ${ref} on the kernel (svc bundle list shows what there is)`;
    throw new CliError(message, EXIT.failed, { error: { code: 'not_found', message, details: { resource: 'bundle', id: ref } } });
  }
  matches.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0));
  return matches[matches.length - 1]!.bundle_id;
}

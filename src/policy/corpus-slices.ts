/**
 * A policy test over a corpus larger than one request may carry. POST /v1/policies/test takes
 * bodies up to 1 MiB like every endpoint but /bundles (decisions §10), and a corpus of 10,000
 * cases is a few MiB; so clients (`svc policy test`, the benchmark) send it in consecutive
 * slices and merge the answers: `cases` summed, each flip's `index` moved by its slice's start.
 */
import { MAX_CORPUS_CASES } from './corpus.js';
import type { PolicyTestResult } from './policy-service.js';

/** The kernel's body limit for POST /v1/policies/test (decisions §10). */
export const POLICY_TEST_BODY_BYTES = 1024 * 1024;

/**
 * Consecutive slices of `corpus` whose JSON array takes at most `budget` bytes and that hold
 * at most `maxCases` cases (the kernel's own limit). A case that is larger than the budget on
 * its own is a slice by itself: the kernel answers it 413, which the caller reports.
 */
export function corpusSlices(corpus: readonly unknown[], budget: number, maxCases = MAX_CORPUS_CASES): unknown[][] {
  const slices: unknown[][] = [];
  let current: unknown[] = [];
  let size = 2; // "[]"
  for (const c of corpus) {
    const bytes = Buffer.byteLength(JSON.stringify(c) ?? 'null');
    if (current.length > 0 && (size + 1 + bytes > budget || current.length >= maxCases)) {
      slices.push(current);
      current = [];
      size = 2;
    }
    size += (current.length > 0 ? 1 : 0) + bytes;
    current.push(c);
  }
  if (current.length > 0 || slices.length === 0) slices.push(current);
  return slices;
}

export interface PolicyTestBodyIn {
  policy_a: { name: string; version?: string };
  policy_b: { name: string; version?: string } | { name?: string; source: string };
  corpus: readonly unknown[];
}

/**
 * Runs a policy test slice by slice through `post` (one POST /v1/policies/test each). The first
 * answer pins the versions it resolved, so a version pushed meanwhile cannot change policy A or
 * a named policy B halfway through.
 */
export async function testInSlices(
  post: (body: PolicyTestBodyIn) => Promise<PolicyTestResult>,
  body: PolicyTestBodyIn,
  maxBytes = POLICY_TEST_BODY_BYTES,
): Promise<PolicyTestResult> {
  const overhead = Buffer.byteLength(JSON.stringify({ ...body, corpus: [] }));
  const slices = corpusSlices(body.corpus, Math.max(1, maxBytes - overhead - 64));
  let merged: PolicyTestResult | null = null;
  let policyA = body.policy_a;
  let policyB = body.policy_b;
  let offset = 0;
  for (const slice of slices) {
    const r = await post({ policy_a: policyA, policy_b: policyB, corpus: slice });
    if (merged === null) {
      merged = { ...r, flips: [] };
      policyA = { name: r.policy_a.name, version: r.policy_a.version };
      if (!('source' in policyB)) policyB = { name: (r.policy_b as { name: string }).name, version: (r.policy_b as { version: string }).version };
    } else merged.cases += r.cases;
    for (const f of r.flips) merged.flips.push({ ...f, index: f.index + offset });
    offset += slice.length;
  }
  return merged!;
}

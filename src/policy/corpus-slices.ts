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
  /** Flips also name the conditions that failed (PolicyTestBody.explain). */
  explain?: boolean;
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
    let r: PolicyTestResult;
    try {
      r = await post({ policy_a: policyA, policy_b: policyB, corpus: slice, ...(body.explain ? { explain: true } : {}) });
    } catch (err) {
      throw renumberCorpusError(err, offset);
    }
    if (merged === null) {
      merged = { ...r, flips: [], ...(r.approver_changes ? { approver_changes: [] } : {}) };
      policyA = { name: r.policy_a.name, version: r.policy_a.version };
      if (!('source' in policyB)) policyB = { name: (r.policy_b as { name: string }).name, version: (r.policy_b as { version: string }).version };
    } else merged.cases += r.cases;
    for (const f of r.flips) merged.flips.push({ ...f, index: f.index + offset });
    for (const c of r.approver_changes ?? []) merged.approver_changes?.push({ ...c, index: c.index + offset });
    offset += slice.length;
  }
  return merged!;
}

/**
 * An error about a case of a slice, renumbered for the whole corpus: the kernel answers
 * `details.path` `/corpus/N/…` (and names it in the message) for the slice it was sent, and the
 * user's file has that case at `offset + N`. The error is changed in place, wherever it carries
 * the kernel's answer: as `details` (an ApiError) or as the envelope in `body` (the CLI's
 * CliError), and in its message. Other errors pass as they are.
 */
export function renumberCorpusError(err: unknown, offset: number): unknown {
  if (offset === 0 || typeof err !== 'object' || err === null) return err;
  const e = err as { message?: unknown; details?: { path?: unknown }; body?: { error?: { message?: unknown; details?: { path?: unknown } } } };
  const carriers = [e.details, e.body?.error?.details].filter((d): d is { path?: unknown } => typeof d === 'object' && d !== null);
  const path = carriers.map((d) => d.path).find((p): p is string => typeof p === 'string');
  const m = path === undefined ? null : /^\/corpus\/(\d+)(?=\/|$)/.exec(path);
  if (!m) return err;
  const local = m[0];
  const whole = `/corpus/${Number(m[1]) + offset}`;
  const renumber = (text: string) => text.replace(new RegExp(`${local}(?![0-9])`, 'g'), whole); // `local` is /corpus/N: no regexp syntax
  for (const d of carriers) if (typeof d.path === 'string') d.path = renumber(d.path);
  if (typeof e.message === 'string') e.message = renumber(e.message);
  if (e.body?.error && typeof e.body.error.message === 'string') e.body.error.message = renumber(e.body.error.message);
  return err;
}

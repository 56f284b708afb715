// Every failure code the worker reports is documented in man/svc-worker.1 (style: one registry
// of stable codes, each documented), and the man page names every SVC_OPENAI_* variable read.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WORKER_ERROR_CODES } from '../../src/worker/errors.js';
import { ROOT } from '../helpers/daemon.js';

const man = readFileSync(join(ROOT, 'man/svc-worker.1'), 'utf8');

describe('man/svc-worker.1', () => {
  it.each(Object.entries(WORKER_ERROR_CODES))('documents %s with its retry class', (code, { deterministic }) => {
    const at = man.indexOf(`.B ${code}\n`);
    expect(at).toBeGreaterThan(0);
    expect(man.slice(at).split('\n')[1]).toMatch(deterministic ? /^Deterministic:/ : /^Retryable:/);
  });

  it('documents every SVC_OPENAI_* variable the provider reads', () => {
    const src = readFileSync(join(ROOT, 'src/worker/providers/openai.ts'), 'utf8');
    const vars = new Set(src.match(/SVC_OPENAI_[A-Z0-9_]+/g));
    expect(vars.size).toBeGreaterThanOrEqual(6);
    for (const v of vars) expect(man).toContain(v);
  });
});

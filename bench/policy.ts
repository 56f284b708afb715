/**
 * Policy decisions per second for a 10-rule policy (compiled once, as the kernel caches it)
 * against the same ten conditions written as a plain JavaScript function (the ceiling), and
 * POST /v1/policies/test over a 10,000-case corpus against the same comparison in-process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSvcd } from '../daemon/server.js';
import { silentLogger } from '../src/log/logger.js';
import { compilePolicy } from '../src/policy/compile.js';
import { comparePolicies, normalizeCorpus } from '../src/policy/corpus.js';
import { testInSlices } from '../src/policy/corpus-slices.js';
import { decide } from '../src/policy/decide.js';
import type { PolicyAction, PolicyRunContext } from '../src/types.js';
import { throughput, type Benchmark, type Row } from './lib/harness.js';
import { httpJson } from './lib/http.js';
import { nowMs } from './lib/stats.js';

export const TEN_RULES = `
deny export_without_pii
  when action.tool.startsWith("crm.export") && !run.remit.grants("pii")
deny refund_not_positive
  when action.tool == "billing.refund" && action.args.amount <= 0
deny huge_refund
  when action.tool == "billing.refund" && action.args.amount > 5000
deny off_hours_delete
  when action.operation == "delete" && run.department == "support"
require_approval large_refund by "role:finance"
  when action.tool == "billing.refund" && action.args.amount > 250
require_approval crm_write by "role:crm-admin"
  when action.connector == "crm" && action.writes
require_approval over_budget
  when run.usage.usd > 50.0
allow small_refund
  when action.tool == "billing.refund" && action.args.amount <= 250
allow void_refund
  when action.tool == "billing.void_refund"
allow reads
  when !action.writes
`;

/** The same ten rules as plain JavaScript: what a decision costs with no policy engine at all. */
function handWritten(a: PolicyAction, r: PolicyRunContext): string {
  const amount = a.args.amount as number;
  if (a.tool.startsWith('crm.export') && !r.remit.grants.includes('pii')) return 'deny';
  if (a.tool === 'billing.refund' && amount <= 0) return 'deny';
  if (a.tool === 'billing.refund' && amount > 5000) return 'deny';
  if (a.operation === 'delete' && r.department === 'support') return 'deny';
  if (a.tool === 'billing.refund' && amount > 250) return 'approval_required';
  if (a.connector === 'crm' && a.writes) return 'approval_required';
  if (r.usage.usd > 50) return 'approval_required';
  if (a.tool === 'billing.refund' && amount <= 250) return 'allow';
  if (a.tool === 'billing.void_refund') return 'allow';
  if (!a.writes) return 'allow';
  return a.writes && a.system_of_record && r.remit.autonomy !== 'autonomous' ? 'approval_required' : 'allow';
}

function corpus(n: number) {
  const tools = ['billing.refund', 'billing.void_refund', 'billing.lookup_invoice', 'crm.export_contacts', 'crm.update', 'fs.delete'];
  return Array.from({ length: n }, (_, i) => {
    const tool = tools[i % tools.length]!;
    const [connector, operation] = tool.split('.') as [string, string];
    return {
      action: { tool, connector, operation, args: { amount: (i * 37) % 6000 - 10 }, writes: operation !== 'lookup_invoice', system_of_record: connector === 'billing', summary: `case ${i}` },
      run: {
        id: `run_${i}`,
        bundle: 'refunds',
        workflow: 'refund',
        department: i % 3 === 0 ? 'support' : 'finance',
        requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' },
        input: {},
        usage: { tokens: 0, usd: (i % 80) * 1.0 },
        remit: { autonomy: i % 5 === 0 ? 'autonomous' : 'supervised', grants: i % 2 ? ['pii'] : [], tools: [], scopes: [] },
      },
    };
  });
}

export const policyBenchmark: Benchmark = {
  name: 'policy',
  description: '10-rule policy decisions per second; /policies/test over a 10,000-case corpus',
  async run(ctx): Promise<Row[]> {
    const cases = normalizeCorpus(corpus(ctx.quick ? 2000 : 10_000));
    const compiled = compilePolicy({ name: 'bench', version: '1.0.0' }, TEN_RULES);
    const rows: Row[] = [];
    rows.push({ label: 'hand-written JS (ceiling)', unit: 'decisions/s', better: 'higher', samples: await throughput(ctx.rounds, cases.length, async () => void cases.forEach((c) => handWritten(c.action, c.run))) });
    rows.push({
      label: 'decide (10 rules, CEL)',
      unit: 'decisions/s',
      better: 'higher',
      baseline: 'hand-written JS (ceiling)',
      target: { medianAtLeast: 50_000, note: '≥ 50,000/s per core' },
      samples: await throughput(ctx.rounds, cases.length, async () => void cases.forEach((c) => decide([compiled], c.action, c.run))),
    });

    const v2 = compilePolicy({ name: 'bench', version: '2.0.0' }, TEN_RULES.replace('> 250', '> 100').replace('<= 250', '<= 100'));
    rows.push({ label: 'compare in-process', unit: 'cases/s', better: 'higher', samples: await throughput(ctx.rounds, cases.length, async () => void comparePolicies(compiled, v2, cases)) });

    const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-policy-'));
    const d = await startSvcd({ logger: silentLogger, token: null, kernel: { dataDir, listen: '127.0.0.1:0' } });
    try {
      const url = `${d.kernelUrl}/v1`;
      for (const [version, source] of [['1.0.0', TEN_RULES], ['2.0.0', TEN_RULES.replace('> 250', '> 100').replace('<= 250', '<= 100')]] as const) {
        const r = await httpJson('POST', `${url}/policies`, { name: 'bench', version, source });
        if (r.status !== 201 && r.status !== 200) throw new Error(`policy post failed: ${JSON.stringify(r.body)}`);
      }
      const raw = corpus(cases.length);
      const samples: number[] = [];
      for (let r = 0; r < ctx.rounds; r++) {
        const t0 = nowMs();
        // In slices of at most 1 MiB a request (decisions §10), as `svc policy test` sends it.
        const result = await testInSlices(
          async (body) => {
            const res = await httpJson('POST', `${url}/policies/test`, body);
            if (res.status !== 200) throw new Error(`policies/test failed: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
            return res.body;
          },
          { policy_a: { name: 'bench', version: '1.0.0' }, policy_b: { name: 'bench', version: '2.0.0' }, corpus: raw },
        );
        if (result.cases !== cases.length) throw new Error(`policies/test answered ${result.cases} cases of ${cases.length}`);
        samples.push((cases.length / (nowMs() - t0)) * 1000);
      }
      rows.push({ label: `POST /policies/test (${cases.length} cases)`, unit: 'cases/s', better: 'higher', baseline: 'compare in-process', samples });
    } finally {
      await d.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
    return rows;
  },
};

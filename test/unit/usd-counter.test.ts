// svc_usage_usd_total (interface 4.1 metrics; decisions §8): dollars summed as exactly as a run's
// usage is, not in binary floats.
import { describe, expect, it } from 'vitest';
import { KernelMetrics } from '../../src/metrics/kernel-metrics.js';

describe('svc_usage_usd_total', () => {
  it('shows 0.1 + 0.2 as 0.3, per department, and a department charged nothing yet as 0', async () => {
    const m = new KernelMetrics();
    m.usageUsd.inc({ department: 'ops' }, 0);
    m.usageUsd.inc({ department: 'support' }, 0.1);
    m.usageUsd.inc({ department: 'support' }, 0.2);
    for (let i = 0; i < 10; i++) m.usageUsd.inc({ department: 'billing' }, 0.000000001);
    const text = await m.text();
    expect(text).toMatch(/^svc_usage_usd_total\{department="support"\} 0\.3$/m);
    expect(text).toMatch(/^svc_usage_usd_total\{department="ops"\} 0$/m);
    expect(text).toMatch(/^svc_usage_usd_total\{department="billing"\} 1e-8$/m);
    expect(text).toMatch(/^# TYPE svc_usage_usd_total counter$/m);
    // A second scrape shows the same sums, not twice them.
    expect(await m.text()).toBe(text);
  });
});

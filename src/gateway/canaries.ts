/**
 * Contract canaries (interface 3, 4.2; decisions §9). Each connector is probed on its own
 * loop: the probe's response is checked against the probe tool's contract, and an MCP server's
 * current tool list against the descriptors the gateway serves (`unexpected_required`).
 * `quarantine_after` consecutive failures quarantine the connector (calls answer 503) and
 * write a repair request file; an operator releases it, or, with `auto_release`, two
 * consecutive passing probes do. Quarantines are recorded in the store and survive restarts.
 */
import { readdirSync, rmSync } from 'node:fs';
import { writeFileDurably } from '../util/durable-file.js';
import { ensureDir } from '../util/ensure-dir.js';
import { basename, join } from 'node:path';
import type { Clock } from '../clock.js';
import { notFound } from '../errors.js';
import { isoTime } from '../clock.js';
import type { Logger, Redactor } from '../log/logger.js';
import type { CanaryConfig, ProbeConfig } from './config.js';
import { probeOperation } from './config.js';
import { checkContract, diffIsEmpty, emptyDiff, shapeOf, type ContractDiff } from './contract.js';
import { abortable, abortMessage, type Connector, type DriftFinding } from './connectors/types.js';
import type { IdempotencyStore } from './idempotency.js';
import { CANARY_STATUS_VALUE, type GatewayMetrics } from './metrics.js';
import { escapeRegExp } from '../util/escape-regexp.js';

export type CanaryHealth = 'healthy' | 'failed' | 'quarantined';

/**
 * Repair requests kept per connector, newest first; older ones are deleted when a new one is
 * written. A flapping upstream with `auto_release` is quarantined again every few minutes,
 * and each quarantine wrote one more file for good.
 */
export const REPAIR_FILES_KEPT = 50;

/**
 * Deletes all but the newest `keep` repair requests of `connector` in `dir` (names sort by
 * time). `written`, the one just written, is always kept and counts as the newest: a clock
 * that was stepped back (files named ahead of it) must not have it deleted as it is made.
 */
export function pruneRepairFiles(dir: string, connector: string, keep = REPAIR_FILES_KEPT, written: string | null = null): void {
  const esc = escapeRegExp(connector);
  const own = new RegExp(`^${esc}-\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}(\\.\\d+)?Z\\.json$`);
  const files = readdirSync(dir).filter((f) => own.test(f) && f !== written).sort();
  const others = Math.max(0, written === null ? keep : keep - 1);
  for (const f of files.slice(0, Math.max(0, files.length - others))) rmSync(join(dir, f), { force: true });
}

/** One connector's entry in GET /v1/canaries (a map keyed by connector name, decisions §9). */
export interface CanaryStatus {
  connector: string;
  status: CanaryHealth;
  last_probe_at: string | null;
  last_ok_at: string | null;
  consecutive_failures: number;
  /** Consecutive passing probes (two release a quarantine when auto_release is on). */
  consecutive_passes: number;
  last_error: string | null;
  contract_diff: ContractDiff;
  quarantined_at: string | null;
  /** Path of the repair request written when the connector was quarantined. */
  repair_file: string | null;
  /** The probe call, null when the connector has none. */
  probe: ProbeConfig | null;
}

/** Passing probes that release a quarantine when auto_release is on (interface 8). */
export const AUTO_RELEASE_PASSES = 2;

export interface CanaryDeps {
  connectors: ReadonlyMap<string, Connector>;
  config: CanaryConfig;
  dataDir: string;
  clock: Clock;
  logger: Logger;
  metrics: GatewayMetrics;
  redactor: Redactor;
  store: IdempotencyStore;
}

function describeDiff(d: ContractDiff, drift: readonly DriftFinding[]): string {
  const parts: string[] = [];
  if (d.missing.length) parts.push(`missing ${d.missing.join(', ')}`);
  if (d.type_mismatch.length) parts.push(`type mismatch ${d.type_mismatch.map((m) => `${m.field} (${m.actual}, expected ${m.expected})`).join(', ')}`);
  if (drift.length) parts.push(`upstream now requires ${drift.map((f) => `${f.field} (${f.tool})`).join(', ')}`);
  return `contract broken: ${parts.join('; ')}`;
}

export class Canaries {
  private readonly states = new Map<string, CanaryStatus>();
  private readonly inFlight = new Map<string, Promise<CanaryStatus>>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private running = false;

  constructor(private readonly deps: CanaryDeps) {
    for (const c of deps.connectors.values()) {
      this.states.set(c.name, {
        connector: c.name,
        status: 'healthy',
        last_probe_at: null,
        last_ok_at: null,
        consecutive_failures: 0,
        consecutive_passes: 0,
        last_error: null,
        contract_diff: emptyDiff(),
        quarantined_at: null,
        repair_file: null,
        probe: c.probe,
      });
    }
  }

  /** Restores quarantines recorded before a restart. */
  async init(): Promise<void> {
    for (const q of await this.deps.store.quarantined()) {
      const s = this.states.get(q.connector);
      if (!s) continue;
      s.status = 'quarantined';
      s.quarantined_at = q.quarantined_at;
      s.repair_file = q.repair_file;
      // Without auto_release passing probes release nothing: say what does, and where the why is.
      s.last_error = this.deps.config.auto_release
        ? `quarantined before the last restart (its repair request says why); release it, or ${AUTO_RELEASE_PASSES} passing probes will`
        : 'quarantined before the last restart (its repair request says why); release it once repaired: svc gateway release';
    }
    for (const s of this.states.values()) this.publish(s);
  }

  has(connector: string): boolean {
    return this.states.has(connector);
  }

  isQuarantined(connector: string): boolean {
    return this.states.get(connector)?.status === 'quarantined';
  }

  health(connector: string): CanaryHealth {
    return this.states.get(connector)?.status ?? 'healthy';
  }

  /** A copy of one connector's status. */
  status(connector: string): CanaryStatus | null {
    const s = this.states.get(connector);
    if (!s) return null;
    return { ...s, probe: this.deps.connectors.get(connector)?.probe ?? null, contract_diff: structuredClone(s.contract_diff) };
  }

  all(): Record<string, CanaryStatus> {
    const out: Record<string, CanaryStatus> = {};
    for (const name of [...this.states.keys()].sort()) out[name] = this.status(name)!;
    return out;
  }

  /** Probes a connector now (a probe already running is joined, not doubled); 404 for an unknown one. */
  probe(connector: string): Promise<CanaryStatus> {
    if (!this.states.has(connector)) return Promise.reject(notFound('connector', connector));
    let p = this.inFlight.get(connector);
    if (!p) {
      p = this.runProbe(connector).finally(() => this.inFlight.delete(connector));
      this.inFlight.set(connector, p);
    }
    return p;
  }

  private async runProbe(name: string): Promise<CanaryStatus> {
    const c = this.deps.connectors.get(name);
    const s = this.states.get(name);
    if (!c || !s) throw notFound('connector', name);
    const { clock, redactor } = this.deps;
    const diff = emptyDiff();
    let drift: DriftFinding[] = [];
    let error: string | null = null;
    let observed: unknown = undefined;
    const probe = c.probe;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`probe timed out after ${c.timeoutMs} ms`)), c.timeoutMs);
    try {
      if (c.drift) {
        drift = await c.drift(controller.signal);
        diff.unexpected_required = [...new Set(drift.map((f) => f.field))];
      }
      if (probe) {
        const op = probeOperation(c.name, probe.tool);
        const tool = c.tools().find((t) => t.operation === op);
        if (!tool) throw new Error(`probe tool ${c.name}.${op} is not offered by the connector`);
        observed = await abortable(
          c.call(op, probe.args, { signal: controller.signal, now: () => clock.now(), enterScope: () => false, outcomeUnknown: () => undefined }),
          controller.signal,
        );
        const d = checkContract(tool.descriptor.contract.required, observed);
        diff.missing = d.missing;
        diff.type_mismatch = d.type_mismatch;
      }
    } catch (err) {
      error = redactor.redact(controller.signal.aborted ? abortMessage(controller.signal) : (err as Error).message ?? String(err));
    } finally {
      clearTimeout(timer);
    }

    const at = isoTime(clock.now());
    s.last_probe_at = at;
    s.contract_diff = diff;
    const passed = error === null && diffIsEmpty(diff);
    if (passed) {
      s.last_ok_at = at;
      s.consecutive_failures = 0;
      s.consecutive_passes++;
      s.last_error = null;
      if (s.status !== 'quarantined') s.status = 'healthy';
      else if (this.deps.config.auto_release && s.consecutive_passes >= AUTO_RELEASE_PASSES) {
        await this.releaseState(s, 'auto');
      }
    } else {
      s.consecutive_passes = 0;
      s.consecutive_failures++;
      s.last_error = error ?? describeDiff(diff, drift);
      if (s.status !== 'quarantined') {
        if (s.consecutive_failures >= this.deps.config.quarantine_after) await this.quarantine(c, s, observed, drift);
        else s.status = 'failed';
      }
      this.deps.logger.warn('canary probe failed', { connector: name, consecutive_failures: s.consecutive_failures, error: s.last_error });
    }
    this.publish(s);
    return this.status(name)!;
  }

  private async quarantine(c: Connector, s: CanaryStatus, observed: unknown, drift: readonly DriftFinding[]): Promise<void> {
    const { clock, redactor, dataDir } = this.deps;
    const now = clock.now();
    s.status = 'quarantined';
    s.quarantined_at = isoTime(now);
    const probe = c.probe;
    const op = probe ? probeOperation(c.name, probe.tool) : null;
    const contract = op ? c.tools().find((t) => t.operation === op)?.descriptor.contract ?? null : null;
    const request = redactor.redactValue({
      connector: c.name,
      created_at: s.quarantined_at,
      consecutive_failures: s.consecutive_failures,
      contract: op ? { tool: `${c.name}.${op}`, ...(contract ?? { required: {} }) } : null,
      observed_shape: observed === undefined ? null : shapeOf(observed),
      diff: s.contract_diff,
      // MCP drift: which tool requires which field, with the input schema the tool declares.
      drift: drift.map((f) => ({ ...f, input_schema: c.tools().find((t) => t.descriptor.id === f.tool)?.descriptor.input_schema ?? null })),
      probe: probe ?? null,
      error: s.last_error,
    });
    let file: string | null = null;
    try {
      // The owner's alone (0700, 0600), whatever the umask: the probe's arguments, the shape it
      // saw and the error quote the connector's data (redacted, but PII stays PII).
      const dir = join(dataDir, 'repairs');
      ensureDir(dir, 0o700);
      file = join(dir, `${c.name}-${isoTime(now).replace(/:/g, '-')}.json`);
      writeFileDurably(file, JSON.stringify(request, null, 2) + '\n', 0o600);
    } catch (err) {
      this.deps.logger.error('cannot write repair request', { connector: c.name, err: (err as Error).message });
      file = null;
    }
    if (file) {
      try {
        pruneRepairFiles(join(dataDir, 'repairs'), c.name, REPAIR_FILES_KEPT, basename(file));
      } catch (err) {
        this.deps.logger.warn('cannot delete old repair requests', { connector: c.name, err: (err as Error).message });
      }
    }
    s.repair_file = file;
    await this.deps.store.setQuarantined(c.name, s.quarantined_at, file);
    this.deps.logger.warn('connector quarantined', { connector: c.name, repair_file: file, error: s.last_error });
  }

  private async releaseState(s: CanaryStatus, by: 'operator' | 'auto'): Promise<void> {
    s.status = 'healthy';
    s.consecutive_failures = 0;
    s.consecutive_passes = 0;
    s.quarantined_at = null;
    await this.deps.store.clearQuarantined(s.connector);
    this.deps.logger.info('connector released', { connector: s.connector, by });
  }

  /**
   * Operator release (POST /v1/canaries/{c}/release): a quarantined connector serves calls
   * again. Decisions §9 has release return the connector's status object, with no condition
   * (unlike resume's 409 for a run that is not parked), so releasing one that is not
   * quarantined answers its status unchanged: nothing to release, and its failure count is
   * not silently reset (interface 3 has the transition from quarantined only).
   */
  async release(connector: string): Promise<CanaryStatus> {
    const s = this.states.get(connector);
    if (!s) throw notFound('connector', connector);
    if (s.status === 'quarantined') {
      await this.releaseState(s, 'operator');
      this.publish(s);
    }
    return this.status(connector)!;
  }

  private publish(s: CanaryStatus): void {
    this.deps.metrics.canaryStatus.set({ connector: s.connector }, CANARY_STATUS_VALUE[s.status]);
  }

  /** Starts one probe loop per connector, every `interval_seconds`. */
  start(): void {
    if (this.running) return;
    this.running = true;
    const ms = Math.max(1, Math.round(this.deps.config.interval_seconds * 1000));
    for (const name of this.states.keys()) {
      const tick = () => {
        if (!this.running) return;
        this.probe(name)
          .catch((err: unknown) => this.deps.logger.error('canary loop error', { connector: name, err: (err as Error).message }))
          .finally(() => {
            if (!this.running) return;
            const t = setTimeout(tick, ms);
            t.unref();
            this.timers.set(name, t);
          });
      };
      const t = setTimeout(tick, ms);
      t.unref();
      this.timers.set(name, t);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight.values()]);
  }
}

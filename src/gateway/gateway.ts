/**
 * The gateway's composition root (interface 1.2): connectors, the idempotency store, one
 * circuit breaker per connector, the canaries, metrics and the kernel link. HTTP lives in
 * daemon/gateway; this file imports nothing of fastify.
 */
import { lockServingDir } from '../store/backup.js';
import { storeHealthFault } from '../store/sqlite-db.js';
import { McpGroups } from './connectors/mcp-groups.js';
import { systemClock, type Clock } from '../clock.js';
import { createLogger, globalRedactor, type Logger, type Redactor } from '../log/logger.js';
import type { ToolDescriptor } from '../types.js';
import { VERSION } from '../version.js';
import { CircuitBreaker } from './breaker.js';
import { handleToolCall, type CallDeps, type CallResponse, type ToolCallRequest } from './call.js';
import { Canaries, type CanaryHealth, type CanaryStatus } from './canaries.js';
import { GatewayConfigError, probeOperation, type ConnectorConfig, type GatewayConfig } from './config.js';
import { FsConnector } from './connectors/fs.js';
import { HttpConnector } from './connectors/http.js';
import type { McpConnectorOptions } from './connectors/mcp.js';
import { SqliteConnector } from './connectors/sqlite.js';
import { TestConnector } from './connectors/test.js';
import { ConnectorSetupError, type Connector, type ConnectorTool } from './connectors/types.js';
import { EventOutbox, type EventOutboxOptions } from './event-outbox.js';
import { IdempotencyStore } from './idempotency.js';
import { HttpKernelLink, type KernelLink } from './kernel-link.js';
import { GatewayMetrics } from './metrics.js';
import { InProcessToolCatalog } from './tool-catalog.js';
import { argsErrors } from './schema-validator.js';

export interface GatewayOptions {
  config: GatewayConfig;
  /** The kernel: in-process or HTTP. (Default: HTTP to config.kernel_url with config.token) */
  link?: KernelLink;
  clock?: Clock;
  /** Uniform in [0, 1) for breaker jitter. (Default: Math.random) */
  random?: () => number;
  logger?: Logger;
  redactor?: Redactor;
  /** Run the canary loops. (Default: true) */
  canaryLoop?: boolean;
  /** MCP restart backoff and startup wait. */
  mcp?: Partial<Omit<McpConnectorOptions, 'logger'>>;
  /** Clock leeway for remit nbf/exp, seconds. (Default: SVC_CLOCK_SKEW_SECONDS or 0) */
  skewSeconds?: number;
  /** Upper bound on waiting for a run event append, ms. (Default: 2000) */
  eventTimeoutMs?: number;
  /** The outbox's retry and bounds (tests). */
  outbox?: Pick<EventOutboxOptions, 'retryMs' | 'maxRetryMs' | 'maxTries' | 'maxRows' | 'maxAgeMs'>;
}

/** GET /v1/health of the gateway (interface 4.2). */
export interface GatewayHealth {
  /** False while the gateway's store refuses writes (a full disk; a failed fsync, until restart). */
  ok: boolean;
  version: string;
  connectors: Record<string, CanaryHealth>;
  /** The store's fault while `ok` is false, as the kernel's health gives it. */
  store?: { error: string; message: string; since: string };
}

/** The mcp connector's module: the MCP SDK and zod take ~150 ms to load, paid only by a config that has one. */
type McpModule = typeof import('./connectors/mcp.js');

function buildConnector(cfg: ConnectorConfig, logger: Logger, mcp: GatewayOptions['mcp'], groups: McpGroups, redactor: Redactor, mcpModule: McpModule | null): Connector {
  switch (cfg.type) {
    case 'sqlite':
      return new SqliteConnector(cfg);
    case 'http':
      return new HttpConnector(cfg, redactor);
    case 'fs':
      return new FsConnector(cfg);
    case 'mcp':
      return new mcpModule!.McpConnector(cfg, { logger: logger.child({ connector: cfg.name }), groups, redactor, ...mcp });
  }
}

export class Gateway {
  readonly metrics = new GatewayMetrics();
  readonly catalog: InProcessToolCatalog;
  readonly connectors = new Map<string, Connector>();
  private readonly breakers = new Map<string, CircuitBreaker>();
  private linkValue: KernelLink;
  private canariesValue!: Canaries;
  private storeValue!: IdempotencyStore;
  private outbox: EventOutbox | null = null;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly redactor: Redactor;
  private deps!: CallDeps;
  private closing: Promise<void> | null = null;
  /** Tool calls running (`idle`). */
  private readonly calls = new Set<Promise<CallResponse>>();
  /** Releases the data directory's lock (taken by `open`). */
  private unlock: () => void = () => {};

  private constructor(
    readonly config: GatewayConfig,
    opts: GatewayOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger ?? createLogger({ base: { svc: 'gateway' } });
    this.redactor = opts.redactor ?? globalRedactor;
    this.linkValue = opts.link ?? new HttpKernelLink({ kernelUrl: config.kernel_url, token: config.token, logger: this.logger });
    this.catalog = new InProcessToolCatalog(this);
  }

  /** Starts every connector (all setup problems are reported together) and the canaries. */
  static async open(opts: GatewayOptions): Promise<Gateway> {
    const gw = new Gateway(opts.config, opts);
    const { config } = opts;
    // Creates the directory (0700) and, before any connector starts, stops a second gateway on it.
    gw.unlock = lockServingDir(config.data_dir, 'gateway data directory', gw.logger);
    const list = await gw.startConnectors(opts);
    for (const c of list) gw.register(c, opts.random);
    try {
      gw.storeValue = await IdempotencyStore.open(config.data_dir, gw.clock);
      gw.outbox = await EventOutbox.open({
        db: gw.storeValue.db,
        link: () => gw.linkValue,
        clock: gw.clock,
        logger: gw.logger,
        redactor: gw.redactor,
        metrics: gw.metrics,
        timeoutMs: opts.eventTimeoutMs ?? 2000,
        ...opts.outbox,
      });
      gw.canariesValue = new Canaries({
        connectors: gw.connectors,
        config: config.canary,
        dataDir: config.data_dir,
        clock: gw.clock,
        logger: gw.logger,
        metrics: gw.metrics,
        redactor: gw.redactor,
        store: gw.storeValue,
      });
      await gw.canariesValue.init(); // reads the store: a failure must not leave processes or the lock behind
    } catch (err) {
      await gw.outbox?.close();
      await gw.storeValue?.close();
      await Promise.allSettled(list.map((c) => c.close()));
      gw.unlock();
      throw err;
    }
    const skew = opts.skewSeconds ?? Number(process.env.SVC_CLOCK_SKEW_SECONDS ?? 0);
    gw.deps = {
      link: () => gw.linkValue,
      clock: gw.clock,
      logger: gw.logger,
      redactor: gw.redactor,
      metrics: gw.metrics,
      store: gw.storeValue,
      canaries: gw.canariesValue,
      skewSeconds: Number.isFinite(skew) && skew >= 0 ? skew : 0,
      events: gw.outbox,
      findTool: (id) => gw.findTool(id),
      breaker: (name) => gw.breakers.get(name)!,
    };
    if (opts.canaryLoop ?? true) gw.canariesValue.start();
    return gw;
  }

  /**
   * Builds and starts every configured connector (and the test tools), all at once. Any that
   * fails to start fails the open with every problem listed, after the others are closed and
   * the directory lock is released.
   */
  private async startConnectors(opts: GatewayOptions): Promise<Connector[]> {
    const { config } = opts;
    // Servers a gateway that was killed left running on this directory end before ours start
    // (once per process: a second gateway opened here in-process shares the record).
    let list: Connector[];
    try {
      const mcpModule = config.connectors.some((c) => c.type === 'mcp') ? await import('./connectors/mcp.js') : null;
      const groups = McpGroups.forDir(config.data_dir, this.logger);
      list = config.connectors.map((c) => buildConnector(c, this.logger, opts.mcp, groups, this.redactor, mcpModule));
    } catch (err) {
      this.unlock();
      throw err;
    }
    if (config.test_tools) list.push(new TestConnector());
    const results = await Promise.allSettled(list.map((c) => c.start()));
    const problems: string[] = [];
    results.forEach((r, i) => {
      if (r.status === 'rejected') {
        // list[i] is config.connectors[i] (the test connector, last, cannot fail to start).
        const e = r.reason as Error;
        const at = `/connectors/${i}`;
        problems.push(...(e instanceof ConnectorSetupError ? e.problems.map((p) => `${at}${p}`) : [`${at}: ${e.message}`]));
      } else if (i < config.connectors.length) {
        const problem = probeArgsProblem(list[i]!);
        if (problem !== null) problems.push(`/connectors/${i}/probe/args: ${problem}`);
      }
    });
    if (problems.length > 0) {
      await Promise.allSettled(list.map((c) => c.close()));
      this.unlock();
      throw new GatewayConfigError(problems.map((p) => this.redactor.redact(p)), config.source ?? '(inline)');
    }
    return list;
  }

  /** A started connector joins the gateway with its circuit breaker and zeroed metrics. */
  private register(c: Connector, random: GatewayOptions['random']): void {
    this.connectors.set(c.name, c);
    this.breakers.set(
      c.name,
      new CircuitBreaker({
        clock: this.clock,
        random,
        onChange: (state) => {
          this.metrics.circuitOpen.set({ connector: c.name }, state === 'closed' ? 0 : 1);
          // An opening is a real failure (the upstream failed call after call, and calls are
          // now refused without being tried): a warning. Half-open and closed are recovery.
          (state === 'open' ? this.logger.warn : this.logger.info).call(this.logger, 'circuit state', { connector: c.name, state });
        },
      }),
    );
    this.metrics.circuitOpen.set({ connector: c.name }, 0);
    // Interface 4.2 metrics exist from the start: one zero sample per tool, so a scrape before
    // the first call already shows svc_gateway_calls_total.
    for (const t of c.tools()) this.metrics.calls.inc({ tool: t.descriptor.id, outcome: 'ok' }, 0);
  }

  /** What the `gateway ready` line says once the gateway listens (svcd logs it). */
  readyFields(): Record<string, unknown> {
    return { connectors: [...this.connectors.keys()], tools: this.tools().length, data_dir: this.config.data_dir };
  }

  get link(): KernelLink {
    return this.linkValue;
  }

  /** Replaces the kernel link (svcd attaches the in-process kernel after both are built). */
  setLink(link: KernelLink): void {
    this.linkValue = link;
  }

  get canaries(): Canaries {
    return this.canariesValue;
  }

  get store(): IdempotencyStore {
    return this.storeValue;
  }

  breaker(connector: string): CircuitBreaker | null {
    return this.breakers.get(connector) ?? null;
  }

  findTool(id: string): { connector: Connector; tool: ConnectorTool } | null {
    const dot = id.indexOf('.');
    if (dot <= 0) return null;
    const connector = this.connectors.get(id.slice(0, dot));
    const op = id.slice(dot + 1);
    const tool = connector?.tools().find((t) => t.operation === op);
    return connector && tool ? { connector, tool } : null;
  }

  /** Every tool descriptor (GET /v1/tools), sorted by id. */
  tools(): ToolDescriptor[] {
    const out: ToolDescriptor[] = [];
    for (const c of this.connectors.values()) for (const t of c.tools()) out.push(t.descriptor);
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  describe(toolId: string): ToolDescriptor | null {
    return this.findTool(toolId)?.tool.descriptor ?? null;
  }

  health(): GatewayHealth {
    const connectors: Record<string, CanaryHealth> = {};
    for (const name of [...this.connectors.keys()].sort()) connectors[name] = this.canariesValue.health(name);
    const store = storeHealthFault(this.storeValue.db);
    return { ok: store === null, version: VERSION, connectors, ...(store ? { store } : {}) };
  }

  /** POST /v1/tools/call. */
  call(req: ToolCallRequest): Promise<CallResponse> {
    const call = handleToolCall(this.deps, req);
    this.calls.add(call);
    void call.finally(() => this.calls.delete(call)).catch(() => undefined);
    return call;
  }

  /**
   * Counts a POST /v1/tools/call answered before the call started: a body that is not JSON,
   * fails the request schema, is too large or has the wrong content type. The client still made
   * a call, so a broken client shows in `svc_gateway_calls_total` under the error code (the tool
   * label follows the same rule as a started call's: `_unknown` unless it names a tool).
   */
  countUnstartedCall(body: unknown, code: string, seconds: number): void {
    const tool = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as { tool?: unknown }).tool : undefined;
    const label = typeof tool === 'string' && this.findTool(tool) ? tool : '_unknown';
    this.metrics.calls.inc({ tool: label, outcome: code });
    this.metrics.latency.observe(seconds);
  }

  canaryStatuses(): Record<string, CanaryStatus> {
    return this.canariesValue.all();
  }

  /** Probes a connector now (404 not_found for an unknown one). */
  probe(connector: string): Promise<CanaryStatus> {
    return this.canariesValue.probe(connector);
  }

  /** Releases a quarantined connector (404 not_found for an unknown one, 409 for one not quarantined). */
  release(connector: string): Promise<CanaryStatus> {
    return this.canariesValue.release(connector);
  }

  /** Sets the shape test.shape's probe returns; false when test tools are off. */
  setTestShape(shape: Record<string, unknown>): boolean {
    const c = this.connectors.get('test');
    if (!(c instanceof TestConnector)) return false;
    c.setShape(shape);
    return true;
  }

  /**
   * Resolves once no call is running. A call whose client hung up runs on to its end (its
   * upstream may be acting): svcd's drain waits for this before it closes the store, so such a
   * call still stores its result and is audited (svcd(8) STARTUP AND SIGNALS).
   */
  async idle(): Promise<void> {
    while (this.calls.size > 0) await Promise.allSettled([...this.calls]);
  }

  /**
   * Stops the canaries, closes the store, ends every connector (MCP process groups included).
   * The store closes first: a call still running when a drain is cut short fails as its
   * connector closes, and must not then release its claim (a write would run again after
   * the restart); with the store closed its claim stays pending, `unknown` at the next start.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.canariesValue?.stop();
      await this.outbox?.close();
      await this.storeValue?.close();
      await Promise.allSettled([...this.connectors.values()].map((c) => c.close()));
      this.unlock();
    })();
    return this.closing;
  }
}

/**
 * A probe whose arguments its tool would refuse as args_invalid checks nothing a call meets (a
 * sqlite probe with a misspelled parameter binds NULL, selects no rows and passes `rows:
 * list`): a problem at load. MCP servers are left out: their tools may not be listed yet, and
 * their probes meet the server's own checks.
 */
function probeArgsProblem(c: Connector): string | null {
  if (!c.probe || c.type === 'mcp') return null;
  const op = probeOperation(c.name, c.probe.tool);
  const tool = c.tools().find((t) => t.operation === op);
  if (!tool || tool.validate(structuredClone(c.probe.args))) return null;
  const errors = argsErrors(tool.validate.errors).map((e) => `${e.path} ${e.message}`);
  return `do not match the input schema of ${c.name}.${op} (${errors.join('; ')}); the probe would never reach the upstream`;
}

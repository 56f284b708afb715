/**
 * Starting and stopping svcd: the kernel listener, the gateway listener, or both in one
 * process (decisions §11). Used by daemon/svcd.ts and by integration tests on port 0.
 */
import '../src/util/regexp-guard.js'; // regexps that run on callers' input (schema patterns and `matches` are RE2)
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Kernel, KernelOptions } from '../src/kernel/kernel.js';
import { redactedLocation } from '../src/store/pg-dialect.js';
import { registerSvcListener } from '../src/gateway/svc-listeners.js';
import { createLogger, type Logger } from '../src/log/logger.js';
import type { GatewayConfig } from '../src/gateway/config.js';
import type { Gateway, GatewayOptions } from '../src/gateway/gateway.js';
import { HttpToolCatalog } from '../src/gateway/tool-catalog.js';
import { parseListen } from './config.js';
import { isLoopbackHost } from './http/common.js';
import { bearerTokenProblem } from '../src/util/http-header-syntax.js';

/** The gateway part of svcd (interface 2.10, decisions §9 and §11). */
export interface SvcdGatewayOptions extends Omit<GatewayOptions, 'config' | 'link' | 'logger'> {
  /** The loaded gateway config (loadGatewayConfig / loadGatewayConfigFile). */
  config: GatewayConfig;
  /** Listener address; wins over config.listen. (Default: config.listen) */
  listen?: string;
}

export interface SvcdOptions {
  kernel?: (Omit<KernelOptions, 'logger'> & { listen?: string }) | false;
  /** Bearer token for the kernel listener; null = loopback-only. */
  token?: string | null;
  logger?: Logger;
  /** The gateway listener; absent or false: no gateway in this process. */
  gateway?: SvcdGatewayOptions | false;
  /** With no gateway in this process: where the kernel reads tool descriptors (GET /v1/tools). */
  gatewayUrl?: string | null;
}

export interface RunningSvcd {
  kernel: Kernel | null;
  gateway: Gateway | null;
  kernelUrl: string | null;
  gatewayUrl: string | null;
  apps: FastifyInstance[];
  /** Stops accepting, drains in-flight requests, closes stores. */
  close(): Promise<void>;
  /**
   * Ends the drain's wait: closes every connection still open, so `close()` goes on to close
   * the stores. Requests still running lose their answer (a gateway write still in flight is
   * `unknown` at the next start, decisions §9).
   */
  cutOff(): void;
}

function urlOf(app: FastifyInstance): string {
  const addr = app.server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `http://${host}:${addr.port}`;
}

/** A listener that could not have its address; `code` is the system's (EADDRINUSE, …). */
export class ListenError extends Error {
  constructor(
    message: string,
    readonly listener: 'kernel' | 'gateway',
    readonly address: string,
    readonly code: string,
  ) {
    super(message);
    this.name = 'ListenError';
  }
}

/**
 * Listens, and says in an operator's words why an address cannot be had: Node's
 * "listen EADDRINUSE: address already in use" names neither the listener nor the flag.
 */
async function listenOn(app: FastifyInstance, what: 'kernel' | 'gateway', at: { host: string; port: number }): Promise<void> {
  try {
    await app.listen(at);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const address = `${at.host.includes(':') ? `[${at.host}]` : at.host}:${at.port}`;
    // Named both ways: the address may have come from the flag or from a config file.
    const flag = `--${what}-listen (or ${what === 'kernel' ? 'kernel.listen' : 'listen in the gateway config'})`;
    const why: Record<string, string> = {
      EADDRINUSE: `the ${what} listener's address ${address} is already in use (another svcd?); choose another with ${flag}, or port 0 for a free one`,
      EACCES: `the ${what} listener may not use ${address} (a port under 1024 needs privileges); choose another with ${flag}`,
      EADDRNOTAVAIL: `the ${what} listener's host ${at.host} is not an address of this machine; choose another with ${flag}`,
    };
    if (code !== undefined && Object.hasOwn(why, code)) throw new ListenError(why[code]!, what, address, code);
    throw err;
  }
}

/** Refuses a non-loopback listener without a token, saying why (interface 5.1). */
export function assertSafeListen(what: string, host: string, token: string | null, tokenHint = 'SVC_TOKEN (or kernel.token in the config)'): void {
  if (token === null && !isLoopbackHost(host)) {
    throw new Error(`${what}: refusing to listen on ${host} without a token; set ${tokenHint} or listen on 127.0.0.1`);
  }
}

export async function startSvcd(opts: SvcdOptions): Promise<RunningSvcd> {
  const logger = opts.logger ?? createLogger();
  const token = opts.token ?? null;
  const tokenProblem = token === null ? null : bearerTokenProblem(token);
  if (tokenProblem !== null) throw new Error(`the kernel's token (SVC_TOKEN or kernel.token) ${tokenProblem}`);
  const apps: FastifyInstance[] = [];
  let kernel: Kernel | null = null;
  let kernelUrl: string | null = null;
  let gateway: Gateway | null = null;
  let gatewayUrl: string | null = null;
  const unregister: Array<() => void> = [];
  try {
    // Both halves open before either listens: a connector that cannot be set up (a statement
    // that does not prepare, a missing fs root or MCP command) stops svcd before it has
    // accepted a single connection, as svc-gateway(5) says.
    let kernelAt: { host: string; port: number } | null = null;
    if (opts.kernel) {
      kernelAt = parseListen(opts.kernel.listen ?? '127.0.0.1:7401');
      assertSafeListen('kernel', kernelAt.host, token);
      // Each half loads only when it runs: a gateway apart (--no-kernel) does without the
      // run engine, a kernel apart (--no-gateway) without the connectors.
      const { Kernel } = await import('../src/kernel/kernel.js');
      kernel = await Kernel.open({ ...opts.kernel, logger });
    }
    let gatewayAt: { host: string; port: number; token: string | null; logger: Logger } | null = null;
    if (opts.gateway) {
      const g = opts.gateway;
      const { host, port } = parseListen(g.listen ?? g.config.listen);
      assertSafeListen('gateway', host, g.config.token, 'SVC_TOKEN or the gateway config token (gateway.token)');
      const gwLogger = logger.child({ component: 'gateway' });
      const [{ Gateway }, { HttpKernelLink, InProcessKernelLink }] = await Promise.all([import('../src/gateway/gateway.js'), import('../src/gateway/kernel-link.js')]);
      // One process: keys by reference and events straight into the run engine. Apart: HTTP with the token.
      const link = kernel ? new InProcessKernelLink(kernel, gwLogger) : new HttpKernelLink({ kernelUrl: g.config.kernel_url, token: g.config.token, logger: gwLogger });
      const { listen: _listen, config, ...rest } = g;
      gateway = await Gateway.open({ clock: kernel?.clock, skewSeconds: kernel?.options.clockSkewSeconds, ...rest, config, link, logger: gwLogger });
      gatewayAt = { host, port, token: g.config.token, logger: gwLogger };
      if (kernel) kernel.toolCatalog = gateway.catalog;
    } else if (kernel && opts.gatewayUrl) {
      kernel.toolCatalog = new HttpToolCatalog({ gatewayUrl: opts.gatewayUrl, token, logger });
    } else if (kernel) {
      // Nothing describes the tools: every one is a write to a system of record (decisions
      // 5.2 fails safe), so a model step's reads are proposed and wait for a manager. Said
      // once here, since no fetch fails later to say it (a kernel apart from its gateway on
      // another host, started without the gateway's address, used to say nothing at all).
      logger.warn('the kernel runs without a gateway and without its address (SVC_GATEWAY_URL or kernel.gateway_url): no tool descriptors, so every tool counts as a write to a system of record and every proposal, reads too, is decided as one', {});
    }
    if (kernel && kernelAt && opts.kernel) {
      const { buildKernelApp } = await import('./app.js');
      const app = await buildKernelApp(kernel, { token });
      apps.push(app);
      await listenOn(app, 'kernel', kernelAt);
      kernelUrl = urlOf(app);
      unregister.push(registerSvcListener(kernelUrl));
    }
    if (gateway && gatewayAt) {
      const { buildGatewayApp } = await import('./gateway/app.js');
      const app = await buildGatewayApp(gateway, { token: gatewayAt.token, logger: gatewayAt.logger });
      apps.push(app);
      await listenOn(app, 'gateway', { host: gatewayAt.host, port: gatewayAt.port });
      gatewayUrl = urlOf(app);
      unregister.push(registerSvcListener(gatewayUrl));
    }
    // Once both listen: a port already taken must not leave a "ready" line behind it.
    // What an operator checks first: where the data is, which key signs, who may call.
    if (gateway && gatewayAt && gatewayUrl) {
      gatewayAt.logger.info('gateway ready', { listen: gatewayUrl, ...gateway.readyFields(), auth: gatewayAt.token ? 'bearer token' : 'loopback clients only' });
      // kernel.token guards the kernel alone (SVC_TOKEN guards both): a secret moved from the
      // environment into the kernel's config section leaves the gateway open to loopback.
      if (kernel && token && !gatewayAt.token) gatewayAt.logger.warn('the kernel takes a bearer token and the gateway does not: any local process may call tools; set gateway.token (or SVC_TOKEN for both)', { listen: gatewayUrl });
    }
    if (kernel && kernelUrl && opts.kernel) {
      logger.info('kernel ready', {
        listen: kernelUrl,
        data_dir: opts.kernel.dataDir,
        // PostgreSQL's place without its password (the redactor would hide it too).
        ...(opts.kernel.store ? { store: redactedLocation(opts.kernel.store) } : {}),
        key_id: kernel.keys.keyId,
        publishers: (opts.kernel.publishers ?? []).length,
        auth: token ? 'bearer token' : 'loopback clients only',
      });
    }
  } catch (err) {
    for (const off of unregister) off();
    for (const app of apps) await app.close();
    await gateway?.close();
    await kernel?.close();
    throw err;
  }
  let closing: Promise<void> | null = null;
  let cutOff: () => void = () => {};
  const cut = new Promise<void>((resolve) => (cutOff = resolve));
  return {
    kernel,
    gateway,
    kernelUrl,
    gatewayUrl,
    apps,
    close() {
      closing ??= (async () => {
        await Promise.all(apps.map((a) => a.close()));
        for (const off of unregister) off();
        // A tool call whose client hung up is still running (its upstream may be acting): it
        // finishes, stores its result and is audited before the store closes, unless the
        // drain's deadline cuts it off first.
        if (gateway) await Promise.race([gateway.idle(), cut]);
        await gateway?.close(); // ends MCP server process groups
        await kernel?.close();
      })();
      return closing;
    },
    cutOff() {
      cutOff();
      for (const app of apps) app.server.closeAllConnections();
    },
  };
}

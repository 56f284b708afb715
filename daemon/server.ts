/**
 * Starting and stopping svcd: the kernel listener, the gateway listener, or both in one
 * process (decisions §11). Used by daemon/main.ts and by integration tests on port 0.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Kernel, type KernelOptions } from '../src/kernel/kernel.js';
import { createLogger, type Logger } from '../src/log/logger.js';
import { buildKernelApp } from './app.js';
import { parseListen } from './config.js';
import { isLoopbackHost } from './http/common.js';

export interface SvcdOptions {
  kernel?: (Omit<KernelOptions, 'logger'> & { listen?: string }) | false;
  /** Bearer token for the kernel listener; null = loopback-only. */
  token?: string | null;
  logger?: Logger;
}

export interface RunningSvcd {
  kernel: Kernel | null;
  kernelUrl: string | null;
  gatewayUrl: string | null;
  apps: FastifyInstance[];
  /** Stops accepting, drains in-flight requests, closes stores. */
  close(): Promise<void>;
}

function urlOf(app: FastifyInstance): string {
  const addr = app.server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `http://${host}:${addr.port}`;
}

/** Refuses a non-loopback listener without a token, saying why (interface 5.1). */
export function assertSafeListen(what: string, host: string, token: string | null): void {
  if (token === null && !isLoopbackHost(host)) {
    throw new Error(`${what}: refusing to listen on ${host} without a token; set SVC_TOKEN (or the config token) or listen on 127.0.0.1`);
  }
}

export async function startSvcd(opts: SvcdOptions): Promise<RunningSvcd> {
  const logger = opts.logger ?? createLogger();
  const token = opts.token ?? null;
  const apps: FastifyInstance[] = [];
  let kernel: Kernel | null = null;
  let kernelUrl: string | null = null;
  try {
    if (opts.kernel) {
      const { host, port } = parseListen(opts.kernel.listen ?? '127.0.0.1:7401');
      assertSafeListen('kernel', host, token);
      kernel = await Kernel.open({ ...opts.kernel, logger });
      const app = await buildKernelApp(kernel, { token });
      await app.listen({ host, port });
      apps.push(app);
      kernelUrl = urlOf(app);
    }
  } catch (err) {
    for (const app of apps) await app.close();
    await kernel?.close();
    throw err;
  }
  let closing: Promise<void> | null = null;
  return {
    kernel,
    kernelUrl,
    gatewayUrl: null,
    apps,
    close() {
      closing ??= (async () => {
        await Promise.all(apps.map((a) => a.close()));
        await kernel?.close();
      })();
      return closing;
    },
  };
}

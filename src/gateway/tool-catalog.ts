/**
 * ToolCatalog implementations for the kernel (decisions 5.2: `writes` and `system_of_record`
 * come from the gateway's descriptors, never from the worker): in-process from a running
 * gateway, or over HTTP from GET {gateway_url}/v1/tools with a short cache.
 */
import type { Logger } from '../log/logger.js';
import type { ToolCatalog, ToolDescriptor } from '../types.js';

/** Descriptors straight from a gateway in the same process. */
export class InProcessToolCatalog implements ToolCatalog {
  constructor(private readonly source: { describe(toolId: string): ToolDescriptor | null }) {}

  async describe(toolId: string): Promise<ToolDescriptor | null> {
    return this.source.describe(toolId);
  }
}

export interface HttpToolCatalogOptions {
  /** Gateway base URL, without /v1. */
  gatewayUrl: string;
  token: string | null;
  /** How long a fetched list is used, ms. (Default: 30000) */
  ttlMs?: number;
  /** Shortest time between refreshes caused by an unknown tool, ms. (Default: 5000) */
  minRefreshMs?: number;
  /** (Default: 5000) */
  timeoutMs?: number;
  now?: () => number;
  /** Where a failed refresh is reported (at most once per refresh, so every 5 s at most). */
  logger?: Logger;
}

/**
 * Descriptors from a gateway over HTTP; an unreachable gateway describes nothing (null), which
 * makes every tool a write to a system of record (decisions 5.2 fails safe), so a failure is
 * logged: an operator seeing every action wait for approval learns why.
 */
export class HttpToolCatalog implements ToolCatalog {
  private byId: Map<string, ToolDescriptor> | null = null;
  private fetchedAt = -Infinity;
  private fetching: Promise<void> | null = null;

  constructor(private readonly opts: HttpToolCatalogOptions) {}

  private now(): number {
    return this.opts.now?.() ?? performance.now(); // monotonic: a clock stepped back must not keep a stale list
  }

  private async refresh(): Promise<void> {
    this.fetchedAt = this.now();
    const headers: Record<string, string> = {};
    if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    const res = await fetch(`${this.opts.gatewayUrl.replace(/\/+$/, '')}/v1/tools`, { headers, signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5000) });
    if (!res.ok) throw new Error(`GET /v1/tools answered ${res.status}`);
    const list = (await res.json()) as ToolDescriptor[];
    if (!Array.isArray(list)) throw new Error('GET /v1/tools did not return an array');
    this.byId = new Map(list.filter((d) => d && typeof d.id === 'string').map((d) => [d.id, d]));
  }

  async describe(toolId: string): Promise<ToolDescriptor | null> {
    const age = this.now() - this.fetchedAt;
    const expired = age >= (this.opts.ttlMs ?? 30_000);
    const mayRefresh = age >= (this.opts.minRefreshMs ?? 5000);
    const unknown = this.byId === null || !this.byId.has(toolId);
    if (expired || (unknown && mayRefresh)) {
      this.fetching ??= this.refresh()
        .catch((err: unknown) => {
          this.opts.logger?.warn('cannot read the gateway tool descriptors; unknown tools count as writes to a system of record', {
            gateway_url: this.opts.gatewayUrl,
            err: (err as Error).message,
          });
        })
        .finally(() => {
          // The hold-back counts from the end of the fetch as well: a fetch that timed out
          // (a gateway dropping packets, 5 s) must not let the next describe, the lease
          // context's right after warmToolDescriptors, wait out another one.
          this.fetchedAt = this.now();
          this.fetching = null;
        });
      await this.fetching;
    }
    return this.byId?.get(toolId) ?? null;
  }
}

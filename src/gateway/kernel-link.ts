/**
 * What the gateway needs from the kernel: the trusted control-plane keys (to verify remits)
 * and a way to append `tool.refused` / `tool.called` events to runs. In one svcd process the
 * link is a direct call into the kernel; apart, it is HTTP with the gateway's token.
 *
 * A failed append never fails a call: a refusal is logged, and a failure that may pass (the
 * kernel does not answer) queues the event in the gateway's outbox (event-outbox.ts).
 */
import { decodeBase64url } from '../encoding/base64url.js';
import { ERROR_CODES, SvcError, type ErrorCode } from '../errors.js';
import { globalRedactor, type Logger } from '../log/logger.js';
import { publicKeyProblem } from '../keys/ed25519.js';
import type { TrustedKeys } from '../types.js';
import { wellFormedJson } from '../encoding/well-formed-json.js';
import { cutText } from '../encoding/cut-text.js';

/** An event the gateway appends to a run (decisions §7 external kinds). */
export interface GatewayEvent {
  kind: string;
  payload: Record<string, unknown>;
  actor: unknown;
}

/**
 * The credential an event is posted with (interface 5.2, decisions §7): the run's remit token
 * (X-Svc-Remit), one of its active leases (X-Svc-Lease), or the kernel bearer alone, which the
 * kernel accepts for `tool.refused` only and only where a bearer is configured (or in-process).
 */
export type EventCredential = { remit: string } | { lease: string } | { bearer: true };

/**
 * The kernel gave no answer at all: it is down for every event, not only this one. `timedOut`:
 * the request was sent and no answer came in time (a hung kernel may still take it later),
 * as against a connection refused (nothing was sent).
 */
export class KernelUnreachable extends Error {
  constructor(
    message: string,
    readonly timedOut = false,
  ) {
    super(message);
    this.name = 'KernelUnreachable';
  }
}

/** Whether an append failed because the kernel refused the credential, so another may do. */
export function isCredentialRefusal(err: unknown): boolean {
  return err instanceof SvcError && (err.code === 'credential_invalid' || err.code === 'credential_required');
}

export interface KernelLink {
  /**
   * The keys remits are verified with. `keyIdHint` is the key id the token names: a link that
   * caches may refresh when it does not know it.
   */
  trustedKeys(keyIdHint?: string): Promise<TrustedKeys>;
  /**
   * Appends an external event to a run under the kernel's own rule for POST /runs/{id}/events
   * (decisions §7): a remit only if it is that run's remit, a lease only if it is active on
   * that run, the bearer alone only for `tool.refused`. Both links apply it (a refused
   * credential throws an SvcError that `isCredentialRefusal` recognises), so where an event
   * lands does not depend on whether the gateway runs beside the kernel or apart from it.
   */
  appendEvent(runId: string, ev: GatewayEvent, cred: EventCredential, opts?: AppendOptions): Promise<void>;
}

/** How long an append may wait for the kernel, and a signal that ends the wait (a closing gateway). */
export interface AppendOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** The part of the kernel the in-process link uses (the run engine may not be attached yet). */
export interface KernelLike {
  keys: TrustedKeys;
  runs?: {
    postExternalEvent(runId: string, ev: { kind: string; payload: Record<string, unknown>; actor: unknown }, cred: { lease?: string; remit?: string; bearer?: boolean }): Promise<unknown>;
  } | null;
}

/** The kernel in the same process: keys by reference, events through the run engine. */
export class InProcessKernelLink implements KernelLink {
  private warned = false;

  constructor(
    private readonly kernel: KernelLike,
    private readonly logger?: Logger,
  ) {}

  async trustedKeys(): Promise<TrustedKeys> {
    return this.kernel.keys;
  }

  async appendEvent(runId: string, ev: GatewayEvent, cred: EventCredential): Promise<void> {
    const runs = (this.kernel as { runs?: KernelLike['runs'] }).runs;
    if (!runs || typeof runs.postExternalEvent !== 'function') {
      if (!this.warned) {
        this.warned = true;
        this.logger?.warn('the kernel has no run engine attached; gateway events are not recorded', { kind: ev.kind });
      }
      return;
    }
    await runs.postExternalEvent(runId, { kind: ev.kind, payload: ev.payload, actor: ev.actor }, cred);
  }
}

export interface HttpKernelLinkOptions {
  /** Kernel base URL, without /v1. */
  kernelUrl: string;
  /** Bearer token for the kernel. */
  token: string | null;
  /**
   * After a refresh that did not find the key id asked for (or failed), how long until an
   * unknown key id may refresh again, ms. (Default: 1000)
   */
  minRefreshMs?: number;
  /** Request timeout, ms. (Default: 5000) */
  timeoutMs?: number;
  /** Clock of the throttle, ms. (Default: performance.now(): a wall clock stepped back held refreshes back by the step) */
  now?: () => number;
  /**
   * Where a key fetch that fails is told, once per outage (a warning), and the fetch that
   * succeeds after it (info): without the keys every call naming a key not yet known is
   * answered 503, and the operator must learn why from the gateway's own log.
   */
  logger?: Logger;
}

class KeyMap implements TrustedKeys {
  constructor(private readonly keys: Map<string, Uint8Array>) {}
  lookup(keyId: string): Uint8Array | null {
    return this.keys.get(keyId) ?? null;
  }
  has(keyId: string): boolean {
    return this.keys.has(keyId);
  }
}

/**
 * The kernel over HTTP: GET /v1/keys (cached, refreshed on an unknown key id), POST
 * /v1/runs/{id}/events.
 *
 * A token signed with a key the cache does not know refreshes at once: right after a
 * rotation every new remit names the new key, and refusing them until a timer ran out would
 * refuse good calls. Only a refresh that did not help (the id is still unknown, or the kernel
 * did not answer) holds the next one back for `minRefreshMs`, so tokens naming made-up key ids
 * cannot turn each call into a request to the kernel. Concurrent refreshes share one fetch.
 */
export class HttpKernelLink implements KernelLink {
  private keys: KeyMap | null = null;
  private lastMiss = -Infinity;
  private fetching: Promise<void> | null = null;
  private refreshFailed: Error | null = null;
  private readonly base: string;

  constructor(private readonly opts: HttpKernelLinkOptions) {
    this.base = opts.kernelUrl.replace(/\/+$/, '');
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.opts.token) h.authorization = `Bearer ${this.opts.token}`;
    return h;
  }

  private async fetchKeys(): Promise<void> {
    const res = await fetch(`${this.base}/v1/keys`, { headers: this.headers(), signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5000) });
    if (!res.ok) throw new Error(`GET /v1/keys answered ${res.status}`);
    const body = (await res.json()) as { key_id?: string; public_key?: string; previous?: Array<{ key_id?: string; public_key?: string }> };
    const map = new Map<string, Uint8Array>();
    for (const k of [body, ...(body.previous ?? [])]) {
      if (typeof k.key_id !== 'string' || typeof k.public_key !== 'string') continue;
      // Checked as a configured key is (decisions §2): a small-order key would verify anything.
      const raw = decodeBase64url(k.public_key);
      if (raw && publicKeyProblem(raw) === null) map.set(k.key_id, raw);
    }
    this.keys = new KeyMap(map);
  }

  async trustedKeys(keyIdHint?: string): Promise<TrustedKeys> {
    const unknown = (): boolean => !this.keys || (keyIdHint !== undefined && !this.keys.has(keyIdHint));
    if (unknown()) {
      // A fetch already on its way may have left the kernel before a rotation: join it, and
      // when it does not know the id either, ask once more rather than wait out the throttle.
      const joined = this.fetching !== null;
      if (joined) await this.fetching; // refresh() settles it, never rejects
      const now = this.opts.now?.() ?? performance.now();
      if (unknown() && ((joined && !this.refreshFailed) || now - this.lastMiss >= (this.opts.minRefreshMs ?? 1000))) {
        await this.refresh();
        // Only a refresh that did not help holds the next one back (a throttled lookup does not).
        if (unknown()) this.lastMiss = this.opts.now?.() ?? performance.now();
      }
    }
    if (!this.keys) throw new SvcError('unavailable', `the kernel's keys are not known yet (${this.base})${this.failureNote()}`, {});
    // A key the cache lacks while the kernel does not answer cannot be judged either way.
    if (unknown() && this.refreshFailed) throw new SvcError('unavailable', `cannot fetch the kernel's keys from ${this.base}${this.failureNote()}`, {});
    return this.keys;
  }

  /** One fetch at a time; remembers whether the last one failed, and logs when that changes. */
  private async refresh(): Promise<void> {
    this.fetching ??= this.fetchKeys()
      .then(
        () => {
          if (this.refreshFailed) this.opts.logger?.info("the kernel's keys are fetched again", { kernel_url: this.base });
          this.refreshFailed = null;
        },
        (err: unknown) => {
          if (!this.refreshFailed) {
            this.opts.logger?.warn(
              this.keys
                ? "cannot fetch the kernel's keys; remits signed with a key not yet known are answered 503 unavailable until it answers"
                : "cannot fetch the kernel's keys; every tool call is answered 503 unavailable until it answers",
              { kernel_url: this.base, err: globalRedactor.redact(causeOf(err)) },
            );
          }
          this.refreshFailed = err as Error;
        },
      )
      .finally(() => {
        this.fetching = null;
      });
    await this.fetching;
  }

  private failureNote(): string {
    return this.refreshFailed ? `: ${this.refreshFailed.message}` : '';
  }

  async appendEvent(runId: string, ev: GatewayEvent, cred: EventCredential, opts: AppendOptions = {}): Promise<void> {
    const headers = this.headers({
      'content-type': 'application/json',
      ...('remit' in cred ? { 'x-svc-remit': cred.remit } : {}),
      ...('lease' in cred ? { 'x-svc-lease': cred.lease } : {}),
    });
    const timeoutMs = opts.timeoutMs ?? this.opts.timeoutMs ?? 5000;
    const timeout = AbortSignal.timeout(timeoutMs);
    const res = await fetch(`${this.base}/v1/runs/${encodeURIComponent(runId)}/events`, {
      method: 'POST',
      headers,
      body: wellFormedJson({ kind: ev.kind, payload: ev.payload, actor: ev.actor }),
      signal: opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout,
    }).catch((err: unknown) => {
      throw new KernelUnreachable(`cannot reach the kernel at ${this.base}: ${timeout.aborted ? `no answer within ${timeoutMs} ms` : causeOf(err)}`, timeout.aborted);
    });
    if (!res.ok) {
      const text = await res.text().catch(() => '');
      const code = errorCodeOf(text);
      const message = `POST /v1/runs/${runId}/events answered ${res.status} ${cutText(globalRedactor.redact(text), 200)}`;
      // A 5xx, a 429 or a refused gateway bearer may pass (a plain Error: the outbox asks
      // again); another 4xx is the kernel's last word on this event (an SvcError).
      if (res.status >= 500 || res.status === 429 || code === 'unauthorized' || code === null || res.status < 400) throw new Error(message);
      throw new SvcError(code, message, {});
    }
  }
}

/** `error.code` of a kernel error envelope when it is one of svc's codes, or null. */
function errorCodeOf(text: string): ErrorCode | null {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
    return typeof code === 'string' && Object.hasOwn(ERROR_CODES, code) ? (code as ErrorCode) : null;
  } catch {
    return null;
  }
}

/** What a failed fetch names: the system error's code (ECONNREFUSED) or the abort's reason. */
function causeOf(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string') return cause.message;
  return err instanceof Error ? err.message : String(err);
}

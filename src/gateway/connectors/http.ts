/**
 * The http connector (interface 2.10, decisions §9): `<connector>.get` (read) and
 * `<connector>.post` (write), only to hosts in `allowed_hosts`. Redirects are followed by
 * hand, and only to hosts that are on the list and granted by the call's remit; any other
 * redirect is returned unfollowed, as the 3xx response it is. A 5xx or 429 answer is an
 * upstream error (it counts for the circuit breaker); other statuses are results.
 */
import { pointerToken } from '../../encoding/json-pointer.js';
import { fetchBlockedPortHint, urlHasFetchBlockedPort } from '../../util/fetch-blocked-ports.js';
import { validHeaderName, validHeaderValue } from '../../util/http-header-syntax.js';
import { readBodyUpTo } from '../../util/read-body.js';
import type { HttpConnectorConfig } from '../config.js';
import { globalRedactor, type Redactor } from '../../log/logger.js';
import { compileInputSchema } from '../schema-validator.js';
import { reachesSvcListener } from '../svc-listeners.js';
import { abortMessage, ArgsInvalid, descriptor, DeterministicFailure, ScopeRefusal, UpstreamError, type CallContext, type Connector, type ConnectorTool } from './types.js';

const MAX_REDIRECTS = 5;
/** svcd's own listeners are never a tool's upstream (src/gateway/svc-listeners.ts). */
async function refuseSvcListener(url: URL): Promise<void> {
  const why = await reachesSvcListener(url);
  if (why !== null) throw new ScopeRefusal(why);
}

/** undici's codes for a request it will not send as given. */
const REQUEST_REFUSED = new Set(['UND_ERR_NOT_SUPPORTED', 'UND_ERR_INVALID_ARG']);
/**
 * Caller headers never sent: framing and hop-by-hop headers fetch sets itself, and
 * accept-encoding, so that an answer always comes in a coding fetch decodes (gzip, deflate,
 * br): an upstream that echoes the request, asked for one fetch cannot decode, would hand the
 * credential back compressed, past the redactor.
 */
const DROPPED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'accept-encoding']);

const baseProperties = {
  url: { type: 'string', minLength: 1, description: 'http or https URL on an allowed host' },
  headers: { type: 'object', additionalProperties: { type: 'string' } },
  query: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] } },
};

export const HTTP_GET_SCHEMA = { type: 'object', required: ['url'], additionalProperties: false, properties: baseProperties };
export const HTTP_POST_SCHEMA = {
  type: 'object',
  required: ['url'],
  additionalProperties: false,
  properties: { ...baseProperties, json: { description: 'sent as application/json' }, body: { type: 'string', description: 'sent as is' } },
  not: { required: ['json', 'body'] },
};

/** True when `host` (lowercase, IPv6 in brackets) is matched by an `allowed_hosts` entry. */
export function hostAllowed(allowed: readonly string[], host: string): boolean {
  const h = host.toLowerCase();
  for (const entry of allowed) {
    if (entry.startsWith('*.')) {
      if (h.endsWith(entry.slice(1)) && h.length > entry.length - 1) return true;
    } else if (entry === h) return true;
  }
  return false;
}

function parseUrl(raw: unknown): URL {
  let url: URL;
  try {
    url = new URL(String(raw));
  } catch {
    throw new ArgsInvalid('url is not an absolute URL', '/url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ArgsInvalid('url must be http or https', '/url');
  if (url.username || url.password) throw new ArgsInvalid('url must not carry credentials', '/url');
  // fetch refuses these before it connects: the caller's argument, found before the key is
  // claimed, never an upstream error the breaker counts or a write of unknown outcome.
  if (urlHasFetchBlockedPort(url.href)) throw new ArgsInvalid(fetchBlockedPortHint(url.href), '/url');
  return url;
}

/**
 * Caller headers fetch would refuse (a name that is not an HTTP token, a value with a control
 * character or one above U+00FF): bad arguments (422), found before the call, so they never
 * reach the circuit breaker as an upstream error.
 */
function checkHeaders(raw: unknown): void {
  for (const [name, value] of Object.entries((raw ?? {}) as Record<string, string>)) {
    if (!validHeaderName(name) || !validHeaderValue(value)) {
      throw new ArgsInvalid(`header ${JSON.stringify(name)} is not a valid HTTP header name and value`, `/headers/${pointerToken(name)}`);
    }
  }
}

/**
 * The body as text, decoded with the charset its content-type declares (UTF-8 when it declares
 * none or one the runtime does not know). The label is the upstream's word, not a fact, and
 * whatever reading is returned, an agent can turn it back into the bytes and read them another
 * way. So when the declared charset is not UTF-8 and the UTF-8 reading shows a secret, the
 * UTF-8 reading is the body returned, to be redacted: it spells every secret the redactor knows
 * as the bytes carry it, UTF-8 itself and, through the NUL-joined spellings registerSecret
 * adds, UTF-16 and UTF-32 either way round at any offset.
 */
export function decodeBody(bytes: Buffer, contentType: string | null, redactor: Pick<Redactor, 'shows'>): string {
  const utf8 = bytes.toString('utf8');
  const label = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '')?.[1];
  if (!label) return utf8;
  let decoder: InstanceType<typeof TextDecoder>;
  try {
    decoder = new TextDecoder(label);
  } catch {
    return utf8; // a label the runtime does not know
  }
  if (decoder.encoding === 'utf-8' || redactor.shows(utf8)) return utf8;
  return decoder.decode(bytes);
}

/**
 * The body, up to `max` bytes. A larger one is a deterministic failure, as the sqlite and fs
 * connectors' limits are: the upstream answered (a retry gets the same), so the breaker does
 * not count it, and a write's key keeps that outcome rather than running again.
 */
async function readLimited(res: Response, max: number, signal: AbortSignal, redactor: Redactor): Promise<string> {
  let read: { bytes: Buffer; whole: boolean };
  try {
    read = await readBodyUpTo(res, max, () => (signal.aborted ? new UpstreamError(abortMessage(signal)) : undefined));
  } catch (err) {
    if (err instanceof UpstreamError) throw err;
    if (signal.aborted) throw new UpstreamError(abortMessage(signal));
    // The connection broke mid-body ("terminated"): the upstream's failure, not svc's.
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    throw new UpstreamError(`the answer was cut off: ${cause ?? (err as Error).message}`, { status: res.status });
  }
  const { bytes, whole } = read;
  if (!whole) throw new DeterministicFailure(`response body is larger than ${max} bytes (max_body_bytes)`, { status: res.status, max_body_bytes: max });
  return decodeBody(bytes, res.headers.get('content-type'), redactor);
}

/** Socket, DNS and connect-timeout errors of a connection that was never made. */
const NOT_CONNECTED: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT', 'ERR_SOCKET_CONNECTION_TIMEOUT']);

/**
 * True when a fetch failed before any of the request could be sent: no connection, or a TLS
 * handshake that failed (a wrong protocol, an expired or untrusted certificate), since HTTP
 * bytes follow the handshake.
 */
function neverConnected(code: string | undefined): boolean {
  if (code === undefined) return false;
  return NOT_CONNECTED.has(code) || /^(ERR_SSL_|ERR_TLS_|CERT_|UNABLE_TO_)/.test(code) || code === 'DEPTH_ZERO_SELF_SIGNED_CERT' || code === 'SELF_SIGNED_CERT_IN_CHAIN';
}

export class HttpConnector implements Connector {
  readonly type = 'http' as const;
  readonly name: string;
  readonly probe;
  readonly timeoutMs: number;
  private readonly list: ConnectorTool[];

  constructor(
    private readonly cfg: HttpConnectorConfig,
    private readonly redactor: Redactor = globalRedactor,
  ) {
    this.name = cfg.name;
    this.probe = cfg.probe;
    this.timeoutMs = cfg.timeout_ms;
    this.list = (['get', 'post'] as const).map((op) => {
      const t = cfg.tools[op] ?? {};
      const schema = t.input_schema ?? (op === 'get' ? HTTP_GET_SCHEMA : HTTP_POST_SCHEMA);
      return {
        operation: op,
        validate: compileInputSchema(schema as Record<string, unknown>),
        descriptor: descriptor({
          id: `${cfg.name}.${op}`,
          connector: cfg.name,
          description: t.description ?? (op === 'get' ? `HTTP GET on ${cfg.allowed_hosts.join(', ')}` : `HTTP POST on ${cfg.allowed_hosts.join(', ')}`),
          writes: op === 'post',
          input_schema: schema as Record<string, unknown>,
          scope_derivation: 'host',
          contract: t.contract ?? { required: { status: 'number' } },
          data_classes: t.data_classes ?? {},
        }),
      };
    });
  }

  async start(): Promise<void> {}

  tools(): ConnectorTool[] {
    return this.list;
  }

  async deriveScopes(_operation: string, args: Record<string, unknown>): Promise<string[]> {
    const url = parseUrl(args.url);
    checkHeaders(args.headers);
    const host = url.hostname.toLowerCase();
    // The parser lower-cased the host: a value spelt in it is redacted in that spelling too.
    if (!hostAllowed(this.cfg.allowed_hosts, host)) throw new ScopeRefusal(`host ${this.redactor.redactLowerCased(host)} is not in allowed_hosts of connector ${this.name}`);
    await refuseSvcListener(url);
    return [`http:host:${host}`];
  }

  async call(operation: string, args: Record<string, unknown>, ctx: CallContext): Promise<unknown> {
    let url = parseUrl(args.url);
    const query = (args.query ?? {}) as Record<string, string | number | boolean>;
    for (const [k, v] of Object.entries(query)) url.searchParams.append(k, String(v));
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries((args.headers ?? {}) as Record<string, string>)) {
      if (!DROPPED_HEADERS.has(k.toLowerCase())) headers[k.toLowerCase()] = v;
    }
    for (const [k, v] of Object.entries(this.cfg.headers)) headers[k.toLowerCase()] = v; // credentials win
    let method = operation === 'post' ? 'POST' : 'GET';
    let body: string | undefined;
    if (method === 'POST') {
      if (args.json !== undefined) {
        body = JSON.stringify(args.json);
        headers['content-type'] ??= 'application/json';
      } else if (typeof args.body === 'string') body = args.body;
    }

    // A POST that fails after it may have reached the upstream has an unknown outcome, so the
    // call's idempotency key refuses a repeat rather than post twice (decisions §9): no answer,
    // an answer whose body was lost, or any failure after the upstream answered it with a
    // redirect (a 303 after a POST usually means it acted). Only a first answer of 5xx or 429
    // (the upstream saying it failed) and a connection never made release the claim.
    const mayHaveWritten = () => {
      if (operation === 'post') ctx.outcomeUnknown();
    };
    await refuseSvcListener(url);
    for (let hop = 0; ; hop++) {
      let res: Response;
      try {
        res = await fetch(url, { method, headers, body, redirect: 'manual', signal: ctx.signal });
      } catch (err) {
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        // undici refusing the request it was given (an `Expect` header, say) is the caller's
        // argument, not the upstream failing: 422, and the breaker does not count it.
        if (!ctx.signal.aborted && cause?.code && REQUEST_REFUSED.has(cause.code)) throw new ArgsInvalid(`the request cannot be sent: ${cause.message ?? cause.code}`, '/headers');
        // A POST that may have reached the upstream (anything but a connection never made to
        // the first host) and got no answer may have acted.
        if (hop > 0 || !neverConnected(cause?.code)) mayHaveWritten();
        if (ctx.signal.aborted) throw new UpstreamError(abortMessage(ctx.signal));
        throw new UpstreamError(`cannot reach ${this.redactor.redactLowerCased(url.host)}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
      }
      const location = res.headers.get('location');
      if ([301, 302, 303, 307, 308].includes(res.status) && location && hop < MAX_REDIRECTS) {
        let next: URL | null = null;
        try {
          next = new URL(location, url);
        } catch {
          next = null;
        }
        const host = next?.hostname.toLowerCase() ?? '';
        const followable =
          next !== null &&
          (next.protocol === 'http:' || next.protocol === 'https:') &&
          // Never from https down to http: the config's credentials would cross in the clear.
          !(url.protocol === 'https:' && next.protocol === 'http:') &&
          // Credentials in the URL are refused from the caller (args_invalid); from a redirect
          // the 3xx is answered as it came, like one to a host outside allowed_hosts.
          !next.username &&
          !next.password &&
          !urlHasFetchBlockedPort(next.href) && // fetch would refuse it: answered as it came
          // Never followed to svcd itself, and not refused either: the request before it was
          // sent and may have acted (a POST), so its answer is the 3xx it got.
          hostAllowed(this.cfg.allowed_hosts, host) &&
          (await reachesSvcListener(next)) === null &&
          ctx.enterScope(`http:host:${host}`);
        if (followable) {
          mayHaveWritten(); // answered: whatever fails from here on may follow a write
          await res.body?.cancel().catch(() => {});
          if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
            method = 'GET';
            body = undefined;
            delete headers['content-type'];
          }
          url = next!;
          continue;
        }
      }
      if (res.status >= 500 || res.status === 429) {
        await res.body?.cancel().catch(() => {}); // its body changes nothing: the upstream failed
        throw new UpstreamError(`${url.host} answered ${res.status}`, { status: res.status });
      }
      let text: string;
      try {
        text = await readLimited(res, this.cfg.max_body_bytes, ctx.signal, this.redactor);
      } catch (err) {
        mayHaveWritten(); // the upstream answered, and its answer is lost
        throw err;
      }
      let json: unknown = null;
      if ((res.headers.get('content-type') ?? '').includes('json')) {
        try {
          json = JSON.parse(text);
        } catch {
          json = null;
        }
      }
      // Names as fetch hands them on, lower-cased: a credential an upstream echoes as a header's
      // name is redacted in that spelling too. Values and bodies are redacted on the way out.
      const headerList = [...res.headers.entries()].map(([name, value]) => [this.redactor.redactLowerCased(name), value]);
      return { status: res.status, headers: Object.fromEntries(headerList), body: text, json };
    }
  }

  async close(): Promise<void> {}
}

/**
 * What every svc listener shares: JSON parsing that never 500s, the error envelope on every
 * failure (ours and fastify's own 400/404/413), bearer auth with a constant-time compare, and
 * loopback-only operation when no token is configured (interface 5.1, decisions §10).
 */
import { storeFault } from '../../src/store/store-fault.js';
import { isUtf8 } from 'node:buffer';
import { createHash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { hostname } from 'node:os';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bodyProblem, textProblem } from '../../src/encoding/json-limits.js';
import { isLoopbackAddress, isLoopbackName } from '../../src/util/loopback.js';
import { SvcError, isSvcError } from '../../src/errors.js';
import { globalRedactor, type Logger, type Redactor } from '../../src/log/logger.js';
import { LogThrottle, throttleFor } from '../../src/log/throttle.js';
import { ajvErrorPath } from '../../src/encoding/json-pointer.js';
import { schemaMessage } from '../../src/encoding/schema-message.js';
import { PRINTABLE_NAME_MESSAGE, PRINTABLE_NAME_PATTERN } from '../../src/util/printable-name.js';
import { shortened } from '../../src/encoding/cut-text.js';
import { escapeRegExp } from '../../src/util/escape-regexp.js';

/** How a listener renders an SvcError (the kernel and the gateway differ, I 7.1 vs 7.2). */
export type ErrorRenderer = (err: SvcError) => unknown;

export const renderKernelError: ErrorRenderer = (err) => err.toEnvelope();

/** Host part of "host:port" is loopback (used to refuse a tokenless non-loopback listener). */
export function isLoopbackHost(host: string): boolean {
  return isLoopbackAddress(host.replace(/^\[|\]$/g, ''));
}

/**
 * Why a request to a tokenless (loopback-only) listener comes from a web page rather than a
 * local program, or null: `log` is the fixed reason for the log (varied Origins must not
 * flood it), `message` the answer's. Any page the operator's browser opens can send a simple POST to
 * 127.0.0.1 (a text/plain body needs no CORS preflight) and, through DNS rebinding, read the
 * answers; loopback alone is then no authority. Browsers name the page in `Origin` on every
 * cross-origin request, and a rebound name arrives in `Host`; local clients (curl, Node's
 * fetch, svc, workers) send no Origin and a loopback or this machine's name as Host.
 */
export function browserRequestProblem(headers: { origin?: string | string[]; host?: string }): { log: string; message: string } | null {
  if (headers.origin !== undefined) {
    return { log: 'Origin header on a listener without a token', message: `a web page (Origin ${String(headers.origin).slice(0, 100)}) cannot call a listener without a token` };
  }
  const host = headers.host;
  if (host === undefined || host === '') return null;
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d*$/, '');
  const lower = name.toLowerCase();
  // A rebinding name is one the attacker registered in public DNS, so it has a dot; a single
  // label (`x`, a host alias) or an IPv6 literal cannot be one.
  if (!lower.includes('.') || lower.includes(':')) return null;
  if (isLoopbackName(lower) || LOCAL_NAMES.has(lower)) return null;
  return { log: 'Host not a name of this machine', message: `Host ${host.slice(0, 100)} is not a name of this machine (a listener without a token answers loopback names only)` };
}

/** This machine's own names, which resolve to loopback in a stock /etc/hosts (127.0.1.1). */
const LOCAL_NAMES = new Set([hostname().toLowerCase(), hostname().toLowerCase().split('.')[0]!]);

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

/** Constant-time bearer check: both sides hashed first so lengths never leak either. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  // The scheme name is case-insensitive (RFC 9110 §11.1).
  const m = header === undefined ? null : /^bearer +(.*)$/is.exec(header);
  if (!m) return false;
  return timingSafeEqual(digest(m[1]!), digest(token));
}

/** 413 payload_too_large, naming the route's limit when known, so a client knows what fits. */
function tooLarge(limit: number | undefined): SvcError {
  return limit === undefined
    ? new SvcError('payload_too_large', 'request body is too large', {})
    : new SvcError('payload_too_large', `request body is over this route's limit of ${limit} bytes`, { limit_bytes: limit });
}

/** How often one store fault (by code) is logged with its stack, per logger; the rest are counted. */
export const STORE_FAULT_LOG_MS = 10_000;
const storeFaultLogs = new WeakMap<object, LogThrottle>();

/**
 * Logs a store fault that failed a request: once per code every STORE_FAULT_LOG_MS, naming how
 * many requests failed with it meanwhile. A full disk fails every write request, and one
 * stack per request (hundreds a second from a few polling workers) filled the log, on the
 * very disk that was full; `/v1/health` says the fault as long as it lasts.
 */
function logStoreFault(logger: Logger, code: string, err: string): void {
  const unlogged = throttleFor(storeFaultLogs, logger, STORE_FAULT_LOG_MS).pass(code);
  if (unlogged === null) return;
  logger.error('the store failed', { code, err, ...(unlogged > 0 ? { not_logged_before: unlogged } : {}) });
}

/** Maps anything thrown inside fastify to an SvcError; `bodyLimit` is the route's (1 MiB, 8 MiB for bundles). */
export function toSvcError(err: unknown, logger?: Logger, bodyLimit?: number): SvcError {
  if (isSvcError(err)) return err;
  const e = err as FastifyError & { validationContext?: string };
  if (e?.validation) {
    const first = e.validation[0];
    const where = e.validationContext && e.validationContext !== 'body' ? `/${e.validationContext}` : '';
    const place = first ? ajvErrorPath(first) : { path: '' };
    const path = where + place.path;
    if (path === '' && first?.keyword === 'type') return new SvcError('request_invalid', 'request body must be a JSON object', { path });
    const message =
      first === undefined ? 'is invalid'
      : first.keyword === 'pattern' && (first.params as { pattern?: string }).pattern === PRINTABLE_NAME_PATTERN ? PRINTABLE_NAME_MESSAGE
      : schemaMessage(first);
    return new SvcError('request_invalid', `${path || '/'} ${message}`, { path });
  }
  switch (e?.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return tooLarge(bodyLimit);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new SvcError('request_invalid', 'request body must be a JSON object', { path: '' });
  }
  // Bodies are parsed by the content-type parser below, which answers with its own SvcError:
  // a SyntaxError reaching here comes from stored data (a damaged store), which is no fault of
  // the request's and must not be reported as one.
  if (e?.statusCode === 400) return new SvcError('request_invalid', `request body is not valid JSON`, { path: '' });
  if (e?.statusCode === 413) return tooLarge(bodyLimit);
  if (e?.statusCode === 404) return new SvcError('not_found', 'no such route', { resource: 'route', id: '' });
  if (e?.statusCode === 405) return new SvcError('method_not_allowed', 'method not allowed', {});
  const fault = storeFault(err);
  if (fault !== null) {
    // A request svcd's drain cut off found its store closing: part of stopping, not a failure.
    if (fault.code === 'SVC_STORE_CLOSED') logger?.warn('a request found the store closing (svcd is stopping)', { code: fault.code });
    else if (logger) logStoreFault(logger, fault.code, e?.stack ?? String(err));
    return new SvcError('unavailable', `the store cannot serve this request: ${fault.message}`, { cause: fault.code });
  }
  logger?.error('unhandled error', { err: e?.stack ?? String(err) });
  return new SvcError('internal', 'internal error', {});
}


/** The longest unread body a connection is kept for, so that its client sees the answer. */
export const MAX_REFUSED_BODY_READ = 64 * 1024 * 1024;

export interface CommonOptions {
  /** Bearer token; null means loopback-only. */
  token: string | null;
  render: ErrorRenderer;
  logger: Logger;
  /**
   * Every JSON body leaves through it: the last line of defence for `${VAR}` values, also
   * when an upstream echoes one back or the kernel hands out an MCP tool's description that
   * quotes its own env. (Default: globalRedactor)
   */
  redactor?: Redactor;
}

/** The renderer installCommon registered for each listener (read by renderFrameworkError). */
const renderers = new WeakMap<object, ErrorRenderer>();
/** Each listener's redactor, for the answers renderClientError writes past onSend. */
const redactors = new WeakMap<object, Redactor>();

/**
 * fastify's `frameworkErrors`: errors the router raises before routing (a URL that does not
 * decode; a path parameter over maxParamLength, which the header limit now keeps from
 * happening). Both are a 400 request_invalid in the listener's own envelope, never fastify's
 * default body.
 */
export function renderFrameworkError(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const render = renderers.get(req.server) ?? renderKernelError;
  const message = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is too long' : 'the request URL is not valid (bad percent-encoding)';
  void reply.status(400).send(render(new SvcError('request_invalid', message, { path: '/url' })));
}

/**
 * fastify's `clientErrorHandler` (`this` is the instance): a request Node's parser refuses
 * (headers over the size limit, a malformed request line, a client timeout) is answered in the
 * listener's envelope too, then the connection is closed. A method Node's parser does not know
 * (`FOO`, a lowercase `get`) is answered as the router answers a known one the path does not
 * serve: 405 with `Allow` on a known path, 404 on an unknown one (docs/design.md "Listeners").
 */
export function renderClientError(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) return;
  // The body of a request already answered (a 413, a 401 read to its end) broke or stalled: a
  // second answer after the first would be garbage to the client. The connection just ends.
  const t = (socket as TrackedSocket)[kTrack];
  if (t !== undefined && t.requests === 0 && t.last?.complete === false) {
    socket.destroy();
    return;
  }
  const render = renderers.get(this) ?? renderKernelError;
  const headers: Record<string, string> = {};
  // Node's parser errors carry `reason` and the bytes it refused, `rawPacket`.
  const { reason: why, rawPacket, bytesParsed } = err as { reason?: unknown; rawPacket?: unknown; bytesParsed?: unknown };
  const unknownMethod =
    err.code === 'HPE_INVALID_METHOD' && Buffer.isBuffer(rawPacket) ? unknownMethodError(this, refusedLine(rawPacket, typeof bytesParsed === 'number' ? bytesParsed : 0), headers) : null;
  let svc: SvcError;
  // Decisions §10 gives request_invalid one status, 400: not HTTP's 431 or 408, so a client
  // that maps codes to statuses (interface 7.1) never meets a pair it does not know.
  if (err.code === 'HPE_HEADER_OVERFLOW') svc = new SvcError('request_invalid', 'request headers are too large (64 KiB together at most)', { path: '/headers' });
  else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') svc = new SvcError('request_invalid', 'the request was not received in time', { path: '' });
  else if (unknownMethod !== null) svc = unknownMethod;
  else if (err.code === 'HPE_PAUSED_H2_UPGRADE') svc = new SvcError('request_invalid', 'HTTP/2 is not served here: send HTTP/1.1', { path: '' });
  else if (err.code === 'HPE_INVALID_VERSION') svc = new SvcError('request_invalid', 'the HTTP version is not served here: send HTTP/1.1 (or HTTP/1.0)', { path: '' });
  else {
    // llhttp's reason is one of its fixed English phrases ("Invalid character in Content-Length").
    const reason = typeof why === 'string' && /^[\x20-\x7e]{1,100}$/.test(why) ? `: ${why}` : '';
    svc = new SvcError('request_invalid', `the request is not valid HTTP${reason}`, { path: '' });
  }
  // Written past onSend, which redacts every other body: the refused line's path is echoed.
  const redactor = redactors.get(this) ?? globalRedactor;
  const json = JSON.stringify(render(svc));
  const answer = rawAnswer(svc.status, redactor.size > 0 ? redactor.redactJsonText(json) : json, headers);
  // Pipelined requests before the refused one are answered first, in order (HTTP/1.1 answers
  // in the order asked): the refusal goes out once the connection has no answer pending.
  whenAnswered(socket as TrackedSocket, () => {
    if (!socket.destroyed && socket.writable) socket.end(answer);
  });
}

/**
 * The request line the parser refused: the packet may hold pipelined requests already parsed
 * before it, and `bytesParsed` is where the parser stopped.
 */
function refusedLine(packet: Buffer, stoppedAt: number): string {
  const at = Math.max(0, Math.min(stoppedAt, packet.length));
  const from = at === 0 ? 0 : packet.lastIndexOf(0x0a, at - 1) + 1;
  return packet.subarray(from, Math.min(packet.length, from + 8192)).toString('latin1').split('\r\n', 1)[0]!;
}

/** A whole HTTP/1.1 answer with a JSON body that closes its connection, for a socket no route owns. */
function rawAnswer(status: number, body: string, extra: Record<string, string> = {}): string {
  const more = Object.entries(extra).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${more}Connection: close\r\n\r\n${body}`;
}

/** A method token as RFC 9110 §5.6.2 has it (the request line's first word). */
const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,32}$/;

/**
 * The answer to a request line whose method llhttp does not know, read from the bytes it
 * refused: 405 with Allow when the path is served, 404 when it is not; null when the line is
 * not `METHOD target HTTP/x` (a garbage line stays "not valid HTTP").
 */
function unknownMethodError(app: FastifyInstance, line: string, headers: Record<string, string>): SvcError | null {
  const [method, target, version, ...rest] = line.split(' ');
  if (method === undefined || target === undefined || rest.length > 0 || !METHOD_TOKEN.test(method) || !/^HTTP\/1\.[01]$/.test(version ?? '')) return null;
  if (!target.startsWith('/')) return null;
  const path = target.split('?')[0]!;
  const shown = shortPath(path);
  const allowed = allowedMethods(app, path);
  if (allowed.length === 0) return new SvcError('not_found', `no route ${method} ${shown}`, { resource: 'route', id: shown });
  headers.Allow = allowed.join(', ');
  return new SvcError('method_not_allowed', `${method} is not allowed on ${shown}; allowed: ${allowed.join(', ')}`, { method, allowed });
}

/** Each listener's routes (path pattern, method), filled by the onRoute hook of installErrorAnswers. */
const routeTables = new WeakMap<object, Array<{ path: RegExp; method: string }>>();

/** The methods the listener serves on a request path (a trailing or doubled slash ignored, as the router does); [] for an unknown path. */
function allowedMethods(app: object, path: string): string[] {
  const routes = routeTables.get(app) ?? [];
  const single = path.replace(/\/{2,}/g, '/');
  const routed = single.length > 1 && single.endsWith('/') ? single.slice(0, -1) : single;
  return [...new Set(routes.filter((r) => r.path.test(routed)).map((r) => r.method))];
}

/** A route's path (`/v1/runs/:id/events`) as a pattern for a request's path. */
export function routePathPattern(url: string): RegExp {
  const segments = url.split('/').map((seg) => (seg.startsWith(':') ? '[^/]+' : seg === '*' ? '.*' : escapeRegExp(seg)));
  return new RegExp(`^${segments.join('/')}$`);
}

const kTrack = Symbol('svc.drainTrack');
type TrackedSocket = Socket & { [kTrack]?: { requests: number; quietAt: number; last?: IncomingMessage; onAnswered?: () => void } };

/**
 * Runs `fn` once the connection has no request waiting for its answer: at once when none, or
 * when the last request has not been read whole (the refusal is about that one: a body that
 * breaks the chunked coding, a body too slow for the request timeout; its route never answers).
 */
function whenAnswered(socket: TrackedSocket, fn: () => void): void {
  const t = socket[kTrack];
  if (t === undefined || t.requests === 0 || t.last?.complete === false) fn();
  else t.onAnswered = fn;
}
type TrackedResponse = ServerResponse & { [kTrack]?: TrackedSocket };

/** A response ended: one request fewer on its connection; quiet again records the bytes read. */
function responseClosed(this: TrackedResponse): void {
  const socket = this[kTrack];
  const t = socket?.[kTrack];
  if (!socket || !t) return;
  t.requests = Math.max(0, t.requests - 1);
  if (t.requests === 0) {
    t.quietAt = socket.bytesRead;
    const then = t.onAnswered;
    t.onAnswered = undefined;
    then?.();
  }
}

/** The stable code of an error answer, kept on its reply for the request's log line. */
const kErrorCode = Symbol('svc.errorCode');
type CodedReply = FastifyReply & { [kErrorCode]?: string };
/** The envelope's code, near the start of every error body either listener sends. */
const ERROR_CODE = /"error":\{"code":"([a-z_]{1,64})"/;

function noteErrorCode(reply: FastifyReply, body: string): void {
  const code = ERROR_CODE.exec(body.slice(0, 256))?.[1];
  if (code !== undefined) (reply as CodedReply)[kErrorCode] = code;
}

/**
 * The stable code of an error answer, as the listener's own onSend hook noted it; a route's
 * onSend runs after that hook. Undefined for an answer that is not an error envelope.
 */
export function errorCodeOfReply(reply: FastifyReply): string | undefined {
  return (reply as CodedReply)[kErrorCode];
}

/** Longest path an error echoes: a 60 KB URL is not worth sending back twice. */
const SHOWN_PATH_CHARS = 256;

function shortPath(path: string): string {
  return shortened(path, SHOWN_PATH_CHARS);
}

/** Installs body parsing, error answers, drain tracking, access checks and request logs on a fastify instance. */
export function installCommon(app: FastifyInstance, opts: CommonOptions): void {
  renderers.set(app, opts.render);
  redactors.set(app, opts.redactor ?? globalRedactor);
  installJsonBodies(app);
  installErrorAnswers(app, opts);
  const drain = installDrainTracking(app, opts.redactor ?? globalRedactor);
  installAccessChecks(app, opts, drain);
  installRawAnswers(app, opts);
  app.addHook('onResponse', (req, reply, done) => {
    const code = (reply as CodedReply)[kErrorCode];
    opts.logger.debug('request', { method: req.method, url: req.url.split('?')[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime), ...(code ? { code } : {}) });
    done();
  });
}

/** Request bodies: JSON only, as sent (UTF-8, no coding, no BOM), I-JSON, within decisions §10's bounds. */
function installJsonBodies(app: FastifyInstance): void {
  // One JSON parser for every content type: an empty body is "no body", bad JSON is a 400.
  // The bytes are checked before they are decoded: decoding replaces invalid UTF-8 with U+FFFD,
  // which would store something other than what the client sent (RFC 8259: JSON is UTF-8).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body, done) => {
    // Bodies are read as sent: a compressed body is not JSON, and a plain one labelled as
    // compressed must not be taken as if the label were not there.
    const coding = req.headers['content-encoding'];
    // A list of codings (RFC 9110 §8.4); empty or only `identity` is no coding at all.
    if (coding !== undefined && coding.split(',').some((c) => c.trim() !== '' && c.trim().toLowerCase() !== 'identity')) {
      return done(new SvcError('request_invalid', `Content-Encoding ${JSON.stringify(coding.slice(0, 64))} is not supported: send the body uncompressed`, { path: '' }), undefined);
    }
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    if (!isUtf8(bytes)) {
      // A label naming another charset (a Java client's ISO-8859-1 default) is the likely cause: name it.
      const charset = /;\s*charset\s*=\s*"?([^";\s]{1,40})/i.exec(req.headers['content-type'] ?? '')?.[1];
      const label = charset !== undefined && !/^utf-?8$/i.test(charset) ? ` (it is labelled charset=${charset}: svc reads bodies as UTF-8 only)` : '';
      return done(new SvcError('request_invalid', `request body is not valid UTF-8${label || ' (a JSON text is UTF-8, RFC 8259)'}`, { path: '' }), undefined);
    }
    if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
      return done(new SvcError('request_invalid', 'request body starts with a byte-order mark, which a JSON text must not (RFC 8259)', { path: '' }), undefined);
    }
    const text = bytes.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      // curl's `--data` and `-F` label a body as a form: say so, the usual cause of this answer.
      const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      const form = type === 'application/x-www-form-urlencoded' || type === 'multipart/form-data' ? ` (it is labelled ${type}: svc takes JSON bodies only)` : '';
      return done(new SvcError('request_invalid', `request body is not valid JSON${form}`, { path: '' }), undefined);
    }
    // I-JSON (RFC 7493), which canonical JSON assumes: no repeated member names, no lone surrogates.
    const p = textProblem(text);
    done(p === null ? null : new SvcError('request_invalid', p.message, { path: p.path }), p === null ? value : undefined);
  });

  // Decisions §10: a body nested too deep for the recursive walks after parsing (hashing,
  // canonical JSON, redaction), or with a number JSON cannot carry (1e400), is a 400.
  // The hooks every request passes take `done` rather than being async: an async hook costs
  // each request a promise and a hop through the microtask queue (bench/README.md item 20).
  app.addHook('preValidation', (req, _reply, done) => {
    const p = bodyProblem(req.body);
    done(p === null ? undefined : new SvcError('request_invalid', p.message, { path: p.path }));
  });
}

/** Errors as the envelope (the route's body limit named in a 413); 405 with Allow for a known path, 404 for the rest. */
function installErrorAnswers(app: FastifyInstance, opts: CommonOptions): void {
  app.setErrorHandler((err, req, reply) => {
    const limit = req.routeOptions?.bodyLimit;
    const svc = toSvcError(err, opts.logger, typeof limit === 'number' ? limit : undefined);
    void reply.status(svc.status).send(opts.render(svc));
  });

  // A known path asked with another method is 405 with `Allow`, not a 404 that would say the
  // path does not exist. (Routes register after this, so the hook sees every one.)
  const routes: Array<{ path: RegExp; method: string }> = [];
  routeTables.set(app, routes);
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) routes.push({ path: routePathPattern(r.url), method });
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]!;
    const shown = shortPath(path);
    // The router ignores a trailing slash (fastify-options.ts); so does this match.
    const allowed = allowedMethods(app, path);
    if (allowed.length > 0 && !allowed.includes(req.method)) {
      const svc = new SvcError('method_not_allowed', `${req.method} is not allowed on ${shown}; allowed: ${allowed.join(', ')}`, { method: req.method, allowed });
      void reply.status(405).header('allow', allowed.join(', ')).send(opts.render(svc));
      return;
    }
    const svc = new SvcError('not_found', `no route ${req.method} ${shown}`, { resource: 'route', id: shown });
    void reply.status(404).send(opts.render(svc));
  });
}

/**
 * What a drain needs to know of connections and requests (which are quiet, which carry a
 * body still coming), the drain itself (preClose), and the onSend hook every response passes:
 * `Connection: close` while draining, and the body's secrets redacted.
 */
function installDrainTracking(app: FastifyInstance, redactor: Redactor): { isClosing: () => boolean } {
  // Each connection: how many requests it is in (headers received, response not yet sent) and
  // how many bytes it had read when it last went quiet. fastify's forceCloseConnections
  // 'idle' closes only keep-alive connections between two requests; one that was opened and
  // never sent a byte (a pool's spare connection, a health checker, a stray `nc`) would hold
  // the drain to its deadline. Such a connection carries nothing to finish, so the drain
  // closes it at once. One that has sent part of a request is left to finish it and get the
  // 503 below.
  // State lives on the socket under a symbol and one shared 'close' handler per response:
  // no map lookup and no closure per request on the hot path.
  const conns = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    (socket as TrackedSocket)[kTrack] = { requests: 0, quietAt: 0 };
    conns.add(socket);
    socket.once('close', () => conns.delete(socket));
  });
  app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const t = (req.socket as TrackedSocket)[kTrack];
    if (!t) return;
    t.requests++;
    t.last = req;
    (res as TrackedResponse)[kTrack] = req.socket as TrackedSocket;
    res.on('close', responseClosed);
  });

  // Requests answered before their body was read (a 413 over the limit, a 401 or 403 turned
  // away in onRequest). Closing such a connection with the upload unread makes the kernel
  // reset it, and a client still sending (fetch does not wait for 100-continue) gets EPIPE
  // instead of the answer (decisions §10): about half the time for an 8 MiB bundle. A body that
  // declares at most MAX_REFUSED_BODY_READ keeps its connection, and Node reads it to its end
  // and drops it once the answer is out; a longer or unsized one is closed (fastify says
  // `Connection: close` for a 413; we do for the rest). The drain ends the kept ones as soon
  // as their body has ended.
  const unreadBodies = new Set<IncomingMessage>();
  const keepForUnreadBody = (req: FastifyRequest, reply: FastifyReply): void => {
    // No length and no chunks: no body (a GET answered while Node is still finishing its parse).
    if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) return;
    const declared = Number(req.headers['content-length']);
    const bounded = req.headers['transfer-encoding'] === undefined && Number.isSafeInteger(declared) && declared <= MAX_REFUSED_BODY_READ;
    if (!bounded) {
      reply.header('Connection', 'close');
      return;
    }
    const raw = req.raw;
    // A client that asked to close (urllib always does, HTTP/1.0 without keep-alive) is told
    // so, but Node closed as soon as the answer was out, the body still arriving: the kernel
    // reset the connection and the client, still sending, read EPIPE instead of the answer
    // (every time for urllib's 9 MiB bundle). The close now waits for the body's end.
    if (reply.raw.shouldKeepAlive) reply.removeHeader('connection');
    else {
      reply.header('Connection', 'close');
      closeAfterBody(raw);
    }
    unreadBodies.add(raw);
    // A connection dropped mid-body fires neither on the request (Node 20): its socket's close
    // does. The socket's listener goes with the request: a keep-alive connection carries many
    // (each refused before its body was read added one, holding its request, until it closed).
    const socket = raw.socket;
    const forget = () => {
      unreadBodies.delete(raw);
      socket.removeListener('close', forget);
    };
    raw.once('end', forget);
    raw.once('close', forget);
    socket.once('close', forget);
  };

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    // A kept connection goes once its body has been read: ended, not reset, so the client
    // still reads its answer (socket.end() sends what is queued first).
    // One that already carries its next request is left to it: that answer says Connection: close.
    for (const raw of unreadBodies) {
      const socket = raw.socket as TrackedSocket;
      const endIfIdle = () => {
        if ((socket[kTrack]?.requests ?? 0) === 0) socket.end();
      };
      raw.once('end', () => setImmediate(endIfIdle));
      if (raw.complete) endIfIdle();
    }
    const quiet = () =>
      [...conns].filter((socket) => {
        const t = (socket as TrackedSocket)[kTrack];
        if (t === undefined || t.requests !== 0 || socket.bytesRead !== t.quietAt) return false;
        for (const raw of unreadBodies) if (raw.socket === socket) return false; // its body is still coming: ended below
        return true;
      });
    const candidates = quiet();
    // One turn of the event loop first: a request already in the kernel's buffer is read
    // then, and its connection is no longer quiet (it gets the 503 instead of a reset).
    await new Promise((r) => setImmediate(r));
    const still = new Set(quiet());
    for (const socket of candidates) if (still.has(socket)) socket.destroy();
  });
  // Node closes the connections that are idle when the drain starts, never those that go idle
  // later: a response finished during the drain (a tool call, a woken long poll) would leave its
  // keep-alive connection open until the client dropped it, and hold svcd to its deadline.
  // The same hook redacts every body (a callback hook: an async one costs each response a
  // promise, bench/README.md item 20); with no secret registered it is one branch. The body
  // stays the JSON it was (a secret's digits inside a number must not break it).
  app.addHook('onSend', (req, reply, payload, done) => {
    if (reply.statusCode >= 400 && typeof payload === 'string') noteErrorCode(reply, payload);
    if (closing) reply.header('Connection', 'close');
    else if (!req.raw.complete) keepForUnreadBody(req, reply);
    done(null, typeof payload === 'string' && redactor.size > 0 ? redactor.redactJsonText(payload) : payload);
  });
  return { isClosing: () => closing };
}

/**
 * Requests Node answers itself when nothing listens, with an empty body: `Expect` other than
 * 100-continue (Node's bare 417) and CONNECT (Node drops the connection unanswered). Both get
 * the listener's envelope and close the connection; the request's body, if any, is not read.
 */
function installRawAnswers(app: FastifyInstance, opts: CommonOptions): void {
  const redactor = opts.redactor ?? globalRedactor;
  const json = (svc: SvcError): string => {
    const body = JSON.stringify(opts.render(svc));
    return redactor.size > 0 ? redactor.redactJsonText(body) : body;
  };
  const logged = (req: IncomingMessage, status: number, code: string) =>
    opts.logger.debug('request', { method: req.method, url: (req.url ?? '').split('?')[0], status, ms: 0, code });
  // D §10 gives request_invalid one status (400), as for over-long headers: not HTTP's 417.
  app.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const expect = String(req.headers.expect ?? '');
    const svc = new SvcError('request_invalid', `Expect ${JSON.stringify(expect.slice(0, 64))} cannot be met: only 100-continue is supported`, { path: '/headers/expect' });
    const body = json(svc);
    res.writeHead(svc.status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
    res.end(body);
    logged(req, svc.status, svc.code);
  });
  // svcd is no proxy: CONNECT (whose target is `host:port`, never a path) is served nowhere.
  app.server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    const svc = new SvcError('method_not_allowed', 'CONNECT is not served here (svcd is not a proxy)', { method: 'CONNECT', allowed: [] });
    if (!socket.destroyed && socket.writable) socket.end(rawAnswer(svc.status, json(svc)));
    else socket.destroy();
    logged(req, svc.status, svc.code);
  });
}

/** Makes Node's close after the answer (`destroySoon`) wait until the request's body has been read to its end. */
function closeAfterBody(raw: IncomingMessage): void {
  const socket = raw.socket as Socket & { destroySoon?: () => void };
  if (typeof socket.destroySoon !== 'function') return;
  socket.destroySoon = function destroyAfterBody(this: Socket) {
    delete (socket as { destroySoon?: unknown }).destroySoon; // the prototype's again
    if (raw.complete) socket.destroySoon!();
    else raw.once('end', () => socket.destroySoon!());
  };
}

/** Turns requests away before their route: while draining (503), without the bearer (401), or, with no token, from anything but a loopback client outside a browser (403). */
function installAccessChecks(app: FastifyInstance, opts: CommonOptions, drain: { isClosing: () => boolean }): void {
  const noteRefusal = refusalLogger(opts.logger);
  // A hook that answers the request itself sends the reply and does not call `done`.
  app.addHook('onRequest', (req: FastifyRequest, reply: FastifyReply, done: () => void) => {
    if (drain.isClosing()) {
      const svc = new SvcError('unavailable', 'the service is shutting down', {});
      reply.status(503).header('Connection', 'close').send(opts.render(svc));
      return;
    }
    // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 (Node's own is an empty body;
    // fastify-options.ts turns it off so that this one is the envelope).
    if (req.headers.host === undefined && req.raw.httpVersionMajor === 1 && req.raw.httpVersionMinor === 1) {
      reply.status(400).header('Connection', 'close').send(opts.render(new SvcError('request_invalid', 'an HTTP/1.1 request needs a Host header (RFC 9112, section 3.2)', { path: '/headers/host' })));
      return;
    }
    if (opts.token !== null) {
      if (!bearerMatches(req.headers.authorization, opts.token)) {
        const svc = new SvcError('unauthorized', 'missing or wrong bearer token', {});
        noteRefusal(req, req.headers.authorization === undefined ? 'no bearer token' : 'wrong bearer token');
        reply.status(401).header('WWW-Authenticate', 'Bearer').send(opts.render(svc));
        return;
      }
    } else if (!isLoopbackAddress(req.socket.remoteAddress)) {
      const svc = new SvcError('forbidden', 'this listener accepts loopback clients only (no token configured)', {});
      noteRefusal(req, 'not a loopback client and no token configured');
      reply.status(403).send(opts.render(svc));
      return;
    } else {
      const browser = browserRequestProblem(req.headers);
      if (browser !== null) {
        noteRefusal(req, browser.log);
        reply.status(403).send(opts.render(new SvcError('forbidden', browser.message, {})));
        return;
      }
    }
    done();
  });
}

/**
 * Logs a caller the listener turned away (401, 403) at most once per address and reason
 * every `everyMs`: an operator must see a client with the wrong token, a flood must not fill
 * the log. The token itself is never logged.
 */
function refusalLogger(logger: Logger, everyMs = 10_000): (req: FastifyRequest, reason: string) => void {
  const last = new Map<string, number>();
  return (req, reason) => {
    const remote = req.socket.remoteAddress ?? 'unknown';
    const key = `${remote}\u0000${reason}`;
    const now = performance.now(); // monotonic: a wall clock stepped back would silence a key for the step
    if ((last.get(key) ?? -Infinity) + everyMs > now) return;
    if (last.size >= 1000) last.clear();
    last.set(key, now);
    logger.warn('request refused', { reason, remote, method: req.method, url: req.url.split('?')[0] });
  };
}

/** A single-valued string query parameter (absent or empty: undefined). */
export function stringQuery(value: unknown, name: string): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw new SvcError('request_invalid', `${name} must be given once, as a string`, { path: `/querystring/${name}` });
  if (value.length > 512) throw new SvcError('request_invalid', `${name} is longer than 512 characters`, { path: `/querystring/${name}` });
  return value;
}

/** A query parameter that must be one of `allowed`, or a 400 naming them. */
export function enumQuery<T extends string>(value: unknown, name: string, allowed: readonly T[]): T | undefined {
  const v = stringQuery(value, name);
  if (v === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(v)) throw new SvcError('request_invalid', `${name} must be one of ${allowed.join(', ')}`, { path: `/querystring/${name}` });
  return v as T;
}

/** An integer query parameter within [min, max] (absent or empty: `def`), or request_invalid. */
export function intQuery(value: unknown, name: string, def: number, min: number, max: number): number {
  if (value === undefined || value === '') return def;
  const path = `/querystring/${name}`;
  if (typeof value !== 'string') throw new SvcError('request_invalid', `${name} must be given once`, { path });
  if (!/^-?\d+$/.test(value)) throw new SvcError('request_invalid', `${name} must be an integer`, { path });
  const n = Number(value);
  if (n < min || n > max) throw new SvcError('request_invalid', `${name} must be between ${min} and ${max}`, { path });
  return n;
}

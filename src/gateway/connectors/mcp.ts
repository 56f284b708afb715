/**
 * The mcp connector (interface 2.10, decisions §9): one MCP SDK `Client` per server life over
 * stdio, tools exposed as `<name>.<tool>`. `writes` is the negation of the tool's
 * `annotations.readOnlyHint`; `x-svc-scope` on a tool's input schema names the argument whose
 * value becomes the scope `mcp:<name>:<value>` (otherwise the remit needs `mcp:<name>:*`).
 *
 * A server that dies is restarted with exponential backoff; its descriptors stay as first
 * listed, so a server that starts requiring a new argument shows up as canary drift
 * (`contract_diff.unexpected_required`) instead of silently changing the contract.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { CallToolResultSchema, ErrorCode, ListToolsResultSchema, McpError, ResultSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { Ajv } from 'ajv';
import { pointerToken } from '../../encoding/json-pointer.js';
import { globalRedactor, type Logger, type Redactor } from '../../log/logger.js';
import { addFormats, withDecimalMultipleOf } from '../../util/schema-options.js';
import { VERSION } from '../../version.js';
import type { McpConnectorConfig } from '../config.js';
import { compileInputSchema } from '../schema-validator.js';
import { linearRegExp } from '../../util/linear-regexp.js';
import { GroupStdioTransport, NotSentError } from './mcp-transport.js';
import type { McpGroups } from './mcp-groups.js';
import { ArgsInvalid, ConnectorSetupError, descriptor, DeterministicFailure, RefusedBeforeAsking, UpstreamError, type CallContext, type Connector, type ConnectorTool, type DriftFinding } from './types.js';
import { cutText, shortened } from '../../encoding/cut-text.js';

/** JSON-RPC errors that refuse the request itself (not the server failing): -32600, -32601, -32602. */
const REFUSED_REQUEST: ReadonlySet<number> = new Set([ErrorCode.InvalidRequest, ErrorCode.MethodNotFound, ErrorCode.InvalidParams]);
/**
 * A request refused before it was written: by our transport (the server's stdin is gone), or
 * by the SDK with no transport at all (its message text is all there is to know it by).
 */
function neverSent(err: unknown): boolean {
  return err instanceof NotSentError || (err instanceof Error && !(err instanceof McpError) && err.message === 'Not connected');
}

/** A check of one tool's structured result against its output schema. */
type ResultCheck = ReturnType<AjvJsonSchemaValidator['getValidator']>;

/**
 * The checks of a tool's `structuredContent` against its `outputSchema`: the SDK's own default
 * ajv set-up, with svc's `multipleOf` (19.99 is a multiple of 0.01; the plain check refused
 * such a result as a deterministic failure of a write that had run). One per server life, as
 * the SDK's default is: ajv caches every schema it compiles (and by `$id`), so a shared one
 * would grow with every restart and let one server's `$id` stand for another's. svc runs the
 * checks itself (McpConnector.learnLife, call): the SDK keeps only the last page's validators
 * of a paged tools/list, and compiles them again at every listing.
 */
function resultValidator(): AjvJsonSchemaValidator {
  // Patterns on the linear-time engine, as every other schema svc checks: a result can carry
  // text an agent put there, and a backtracking pattern would hold the event loop.
  const ajv = withDecimalMultipleOf(new Ajv({ strict: false, validateFormats: true, validateSchema: false, allErrors: true, code: { regExp: linearRegExp } }));
  addFormats(ajv);
  return new AjvJsonSchemaValidator(ajv);
}

/** Longest text of a server's own error (an `isError` text, a JSON-RPC error message) that svc passes on. */
const MAX_ERROR_TEXT = 1000;

/**
 * `raw` read as a tools/call result as MCP defines it, or why it is not one (a content block
 * of a type the protocol does not have, `content` that is not a list): short, and naming
 * where, where the SDK's own refusal is its validator's whole report, kilobytes of JSON.
 */
function toolResultOf(raw: unknown): { ok: true; result: CallToolResult } | { ok: false; problem: string } {
  const parsed = CallToolResultSchema.safeParse(raw);
  if (parsed.success) return { ok: true, result: parsed.data };
  const issue = parsed.error.issues[0];
  const path = issue?.path ?? [];
  const where = path.length > 0 ? `/${path.map((p) => pointerToken(String(p))).join('/')}` : 'the result';
  // A content block the protocol does not know is the usual case: its type says most.
  const block = path[0] === 'content' && path.length === 2 ? (raw as { content?: unknown[] }).content?.[path[1] as number] : undefined;
  const type = (block as { type?: unknown } | undefined)?.type;
  return { ok: false, problem: `${where}: ${issue?.message ?? 'invalid'}${typeof type === 'string' ? ` (a content block of type "${shortened(type, 64)}")` : ''}` };
}

/** Errors the SDK makes up itself for a request the server never answered. */
const LOCAL_ERRORS: ReadonlySet<number> = new Set([ErrorCode.RequestTimeout, ErrorCode.ConnectionClosed]);

interface McpTool extends ConnectorTool {
  /** The argument named by `x-svc-scope`, if any. */
  scopeArg: string | null;
}

export interface McpConnectorOptions {
  logger: Logger;
  /** First restart delay, doubled per failed start up to maxBackoffMs. (Default: 500) */
  initialBackoffMs?: number;
  /** (Default: 30000) */
  maxBackoffMs?: number;
  /** How long start() waits for the first connection and listing; a restart, up to 8 times that (restartBound). (Default: 15000) */
  startupTimeoutMs?: number;
  /** Where running servers are written down, so the next gateway can end what a crash left. */
  groups?: McpGroups;
  /** Redacts texts before they are cut to length (a cut secret is no longer recognised). (Default: globalRedactor) */
  redactor?: Redactor;
}

export type McpState = 'starting' | 'ready' | 'down' | 'closed';

const SPAWN_CONFIG_ERRORS = new Set(['ENOENT', 'EACCES', 'ENOTDIR']);

/** Most tools one connector keeps, over every listing of every server life. */
export const MAX_TOOLS = 10_000;

/** A restart may take up to 2^this times the startup bound (restartBound). */
const MAX_STARTUP_DOUBLINGS = 3;

/** How long a restarted server must stay up before its restart backoff starts over. */
const STABLE_AFTER_MS = 10_000;

function requiredOf(schema: unknown): string[] {
  const r = (schema as { required?: unknown } | null)?.required;
  return Array.isArray(r) ? r.filter((x): x is string => typeof x === 'string') : [];
}

/**
 * True when a prefix grant cannot bound what `value` names: a `..` segment or a NUL, as a
 * server might read the value — a path, or a URL, whose parsers drop tabs and line breaks,
 * end the path at `?`, `#` or `;`, and decode `%2e` (`%252e` twice); compatibility forms such
 * as the full-width dot (U+FF0E) and the two-dot leader (U+2025) taken as what NFKC makes of them.
 */
export function unboundedByPrefix(value: string): boolean {
  let decoded = value.normalize('NFKC').replace(/[\t\r\n]/g, '');
  for (let i = 0; i < 4; i++) {
    const next = decoded.replace(/%25/gi, '%').replace(/%2e/gi, '.').replace(/%2f/gi, '/').replace(/%5c/gi, '\\').replace(/%00/g, '\0');
    if (next === decoded) break;
    decoded = next;
  }
  if (decoded.includes('\0')) return true;
  return decoded.split(/[\\/?#;]/).some((segment) => segment === '..');
}

export class McpConnector implements Connector {
  readonly type = 'mcp' as const;
  readonly name: string;
  readonly probe;
  readonly timeoutMs: number;
  private client: Client | null = null;
  /** This server life's checks of structured results, by tool name (tools with an outputSchema). */
  private outputChecks = new Map<string, ResultCheck>();
  /** Tools this server life runs only as tasks (`execution.taskSupport: required`), which svc does not drive. */
  private taskOnly = new Set<string>();
  private transport: GroupStdioTransport | null = null;
  private stateValue: McpState = 'starting';
  private readonly list = new Map<string, McpTool>();
  /** Configuration mistakes about tools: already logged, once each per connector. */
  private readonly warned = new Set<string>();
  private attempt = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Forgets the restart backoff once a server has stayed up STABLE_AFTER_MS. */
  private stableTimer: NodeJS.Timeout | null = null;
  private connecting: Promise<void> | null = null;
  /** Number of times the server was (re)connected; tests wait on it. */
  generation = 0;

  private readonly redactor: Redactor;

  constructor(
    private readonly cfg: McpConnectorConfig,
    private readonly opts: McpConnectorOptions,
  ) {
    this.name = cfg.name;
    this.probe = cfg.probe;
    this.timeoutMs = cfg.timeout_ms;
    this.redactor = opts.redactor ?? globalRedactor;
  }

  get state(): McpState {
    return this.stateValue;
  }

  /** The server's pid (its process group id), while it runs. */
  get pid(): number | null {
    return this.transport?.pid ?? null;
  }

  async start(): Promise<void> {
    const startup = this.opts.startupTimeoutMs ?? 15_000;
    try {
      await this.connect(startup);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code && SPAWN_CONFIG_ERRORS.has(code)) {
        this.stateValue = 'closed';
        throw new ConnectorSetupError([`/command: cannot start ${this.cfg.command[0]}: ${code}`]);
      }
      this.opts.logger.warn('mcp server did not start; retrying with backoff', { connector: this.name, err: (err as Error).message });
      this.markDown();
    }
  }

  private connect(timeoutMs: number): Promise<void> {
    this.connecting ??= this.connectOnce(timeoutMs).finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async connectOnce(timeoutMs: number): Promise<void> {
    const [command, ...args] = this.cfg.command as [string, ...string[]];
    const transport = new GroupStdioTransport({
      command,
      args,
      env: this.cfg.env,
      cwd: this.cfg.cwd,
      // Redacted whole before it is cut: a cut through a secret would leave a piece the
      // logger's redaction no longer recognises.
      onStderr: (line) => this.opts.logger.info('mcp stderr', { connector: this.name, line: cutText(this.redactor.redact(line), 4000) }),
      onGroupStarted: (pid, mark) => this.opts.groups?.add(pid, this.name, mark),
      onGroupEnded: (pid) => this.opts.groups?.remove(pid),
    });
    const validators = resultValidator();
    const client = new Client({ name: 'svc-gateway', version: VERSION }, { capabilities: {}, jsonSchemaValidator: validators });
    this.transport = transport;
    this.client = client;
    client.onclose = () => {
      if (this.client === client) this.markDown();
    };
    // debug: the SDK's messages quote whole late responses (tool results) in their text.
    client.onerror = (err) => this.opts.logger.debug('mcp transport error', { connector: this.name, err: this.redactor.redact(err.message) });
    try {
      await client.connect(transport, { timeout: timeoutMs });
      const tools = await this.listAll(client, AbortSignal.timeout(timeoutMs));
      if (this.stateValue === 'closed') {
        await client.close();
        return;
      }
      this.learn(tools);
      this.learnLife(tools, validators);
      this.stateValue = 'ready';
      // A server that answers initialize and dies at once would otherwise restart every
      // initial backoff for ever: the backoff is forgotten only after it stays up a while.
      this.clearStableTimer();
      this.stableTimer = setTimeout(() => {
        this.stableTimer = null;
        this.attempt = 0;
      }, STABLE_AFTER_MS);
      this.stableTimer.unref();
      this.generation++;
      this.opts.logger.info('mcp server ready', { connector: this.name, pid: transport.pid, tools: this.list.size });
    } catch (err) {
      if (this.client === client) this.client = null;
      await transport.close().catch(() => {});
      throw err;
    }
  }

  /**
   * Every tool the server lists, every page. Asked raw, not through the SDK's listTools: that
   * resets its output validators at each page (keeping the last page's only) and compiles
   * them again at every canary probe; svc builds its own once per life (outputChecksOf).
   */
  private async listAll(client: Client, signal: AbortSignal): Promise<Tool[]> {
    const out: Tool[] = [];
    let cursor: string | undefined;
    do {
      const params = cursor ? { cursor } : undefined;
      const page = await client.request({ method: 'tools/list', params }, ListToolsResultSchema, { signal, timeout: this.timeoutMs });
      out.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor && out.length < MAX_TOOLS);
    return out;
  }

  /**
   * What this server life checks on each call, from its tool list: the output schema of each
   * tool that has one (one that does not compile is logged and its results go unchecked), and
   * the tools that run only as tasks.
   */
  private learnLife(tools: Tool[], validators: AjvJsonSchemaValidator): void {
    const checks = new Map<string, ResultCheck>();
    for (const t of tools) {
      if (!t.outputSchema || checks.has(t.name)) continue;
      try {
        checks.set(t.name, validators.getValidator(t.outputSchema as Record<string, unknown>));
      } catch (err) {
        this.opts.logger.warn('an MCP tool output schema does not compile; its results go unchecked', { connector: this.name, tool: t.name, err: this.redactor.redact((err as Error).message) });
      }
    }
    this.outputChecks = checks;
    this.taskOnly = new Set(tools.filter((t) => (t as { execution?: { taskSupport?: string } }).execution?.taskSupport === 'required').map((t) => t.name));
  }

  /**
   * Descriptors are fixed by the first listing; later listings only add tools not seen before,
   * up to MAX_TOOLS in all (a server listing new names at every start must not grow svcd).
   */
  private learn(tools: Tool[]): void {
    for (const t of tools) {
      if (this.list.has(t.name)) continue;
      if (this.list.size >= MAX_TOOLS) {
        this.opts.logger.warn('mcp server lists more tools than a connector keeps; the rest are not offered', { connector: this.name, max: MAX_TOOLS });
        break;
      }
      const override = this.cfg.tools[t.name] ?? {};
      const inputSchema = (override.input_schema ?? t.inputSchema ?? { type: 'object' }) as Record<string, unknown>;
      const scopeArg = typeof inputSchema['x-svc-scope'] === 'string' ? (inputSchema['x-svc-scope'] as string) : null;
      this.checkScopeKey(t.name, inputSchema, scopeArg);
      let validate;
      try {
        validate = compileInputSchema(inputSchema);
      } catch (err) {
        this.opts.logger.warn('mcp tool input schema does not compile; the tool is not offered', { connector: this.name, tool: t.name, err: (err as Error).message });
        continue;
      }
      this.list.set(t.name, {
        operation: t.name,
        scopeArg,
        validate,
        descriptor: descriptor({
          id: `${this.name}.${t.name}`,
          connector: this.name,
          description: override.description ?? t.description ?? '',
          writes: override.writes ?? t.annotations?.readOnlyHint !== true,
          input_schema: inputSchema,
          scope_derivation: scopeArg ? 'x-svc-scope' : 'none',
          contract: override.contract ?? { required: { content: 'list' } },
          data_classes: override.data_classes ?? {},
        }),
      });
    }
    // Settings under tools: for a name the server does not list apply to nothing: a typo, or
    // a tool the server dropped. Said once (a later life of the server may still list it).
    for (const name of Object.keys(this.cfg.tools)) {
      if (this.list.has(name) || this.warned.has(`tool:${name}`)) continue;
      this.warned.add(`tool:${name}`);
      this.opts.logger.warn('gateway config sets a tool the mcp server does not list; its settings apply to nothing', {
        connector: this.name,
        tool: name,
        listed: [...this.list.keys()].slice(0, 50),
      });
    }
  }

  /**
   * x-svc-scope is read at the top level of a tool's input schema, its value the name of the
   * argument that carries the scope. Put on a property, or naming no property, it is a
   * mistake that would leave the tool scoped to the whole server or refusing every call:
   * logged once, naming the fix.
   */
  private checkScopeKey(tool: string, schema: Record<string, unknown>, scopeArg: string | null): void {
    const props = schema.properties !== null && typeof schema.properties === 'object' && !Array.isArray(schema.properties) ? (schema.properties as Record<string, unknown>) : {};
    let problem: string | null = null;
    if (scopeArg === null) {
      const nested = Object.keys(props).find((k) => {
        const p = props[k];
        return p !== null && typeof p === 'object' && Object.hasOwn(p, 'x-svc-scope');
      });
      if (nested !== undefined) problem = `x-svc-scope sits on property ${nested}; put "x-svc-scope": "${nested}" at the top level of the input schema instead (the tool is scoped to the whole server meanwhile)`;
      else if (Object.hasOwn(schema, 'x-svc-scope')) problem = 'x-svc-scope must be a string naming the argument that carries the scope (the tool is scoped to the whole server meanwhile)';
    } else if (!Object.hasOwn(props, scopeArg)) {
      problem = `x-svc-scope names argument ${scopeArg}, which the input schema does not have; every call without it is args_invalid`;
    }
    if (problem === null || this.warned.has(`scope:${tool}`)) return;
    this.warned.add(`scope:${tool}`);
    this.opts.logger.warn('mcp tool x-svc-scope is misplaced', { connector: this.name, tool, problem });
  }

  private clearStableTimer(): void {
    if (this.stableTimer) clearTimeout(this.stableTimer);
    this.stableTimer = null;
  }

  private markDown(): void {
    if (this.stateValue === 'closed') return;
    if (this.stateValue === 'ready') this.opts.logger.warn('mcp server stopped; restarting with backoff', { connector: this.name });
    this.stateValue = 'down';
    this.client = null;
    this.clearStableTimer();
    if (this.timer) return;
    const initial = this.opts.initialBackoffMs ?? 500;
    const delay = Math.min(initial * 2 ** this.attempt, this.opts.maxBackoffMs ?? 30_000);
    this.attempt++;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.stateValue === 'closed') return;
      this.stateValue = 'starting';
      this.connect(this.restartBound()).catch((err: unknown) => {
        this.opts.logger.warn('mcp server restart failed', { connector: this.name, err: (err as Error).message, attempt: this.attempt });
        this.markDown();
      });
    }, delay);
    this.timer.unref();
  }

  /**
   * How long a restart may take to answer initialize and list its tools: the startup bound
   * doubled per failed start so far, up to 8 times it. With the same bound every time, a
   * server slower than it (a cold `npx` download) was ended at every attempt and never came
   * up; the bound of the first start only keeps svcd's own start short.
   */
  private restartBound(): number {
    return (this.opts.startupTimeoutMs ?? 15_000) * 2 ** Math.min(this.attempt, MAX_STARTUP_DOUBLINGS);
  }

  tools(): ConnectorTool[] {
    return [...this.list.values()];
  }

  async deriveScopes(operation: string, args: Record<string, unknown>): Promise<string[]> {
    const tool = this.list.get(operation);
    if (!tool?.scopeArg) return [`mcp:${this.name}:*`];
    const v = args[tool.scopeArg];
    if (!((typeof v === 'string' && v !== '') || (typeof v === 'number' && Number.isFinite(v)))) {
      throw new ArgsInvalid(`argument ${tool.scopeArg} names the scope (x-svc-scope) and must be a non-empty string or a number`, `/${pointerToken(tool.scopeArg)}`);
    }
    const value = String(v);
    // The value is the server's to read, and a grant is a prefix glob over it: a `..` segment
    // (`<dir>/pub/../secret`, also spelt `%2e%2e`) would name, under a grant of `<dir>/pub/*`,
    // what the server resolves outside it, and a NUL may end the name early. Such a value
    // also needs the whole server (`mcp:<name>:*`), the one grant no value can leave.
    return unboundedByPrefix(value) ? [`mcp:${this.name}:${value}`, `mcp:${this.name}:*`] : [`mcp:${this.name}:${value}`];
  }

  scopeAlternatives(scope: string): string[] {
    return scope === `mcp:${this.name}:*` ? [`${this.name}:*`] : [];
  }

  async call(operation: string, args: Record<string, unknown>, ctx: CallContext): Promise<unknown> {
    const client = this.client;
    if (this.stateValue !== 'ready' || !client) throw new UpstreamError(`MCP server ${this.name} is not running (${this.stateValue})`);
    // Refused before it is sent, as the SDK refuses it when it has listed the tools itself.
    if (this.taskOnly.has(operation)) throw new RefusedBeforeAsking(`tool ${operation} requires task-based execution, which svc does not drive`, { mcp_code: ErrorCode.InvalidRequest });
    let raw;
    try {
      // Asked raw, as tools/list is, taking any result object: its shape is checked below, so
      // that an answer the protocol does not allow is told apart from no answer at all.
      raw = await client.request({ method: 'tools/call', params: { name: operation, arguments: args } }, ResultSchema, { signal: ctx.signal, timeout: this.timeoutMs });
    } catch (err) {
      // The server (or the SDK for it) refusing this request answers the same every time:
      // deterministic, never retried, and not a failure the breaker counts.
      if (err instanceof McpError && REFUSED_REQUEST.has(err.code)) {
        throw new DeterministicFailure(this.errorText(err.message), { mcp_code: err.code });
      }
      // The request went to the server, and no answer came: given up at the timeout, the
      // gateway stopping, or the server gone mid-call. A write may have run, so its key must
      // not let a retry run it again (decisions §9, as a killed sqlite write). An error the
      // server answered is an answer: that one releases the claim.
      if (!neverSent(err) && (!(err instanceof McpError) || LOCAL_ERRORS.has(err.code))) ctx.outcomeUnknown();
      throw new UpstreamError(`MCP server ${this.name}: ${this.errorText((err as Error).message)}`, err instanceof McpError ? { mcp_code: err.code } : {});
    }
    // The server answered, and a result it cannot send otherwise would come back the same:
    // a deterministic failure, stored under the key (a write did run) and not counted by the
    // breaker, as a structured result that does not fit its output schema below.
    const read = toolResultOf(raw);
    if (!read.ok) throw new DeterministicFailure(`tool ${operation} answered with a result that is not an MCP tool result: ${this.errorText(read.problem)}`, {});
    const res = read.result;
    // As the SDK would (MCP: a tool with an output schema returns structured content that fits it).
    const check = res.isError === true ? undefined : this.outputChecks.get(operation);
    if (check) {
      if (res.structuredContent === undefined) throw new DeterministicFailure(`tool ${operation} has an output schema but returned no structured content`, {});
      const verdict = check(res.structuredContent);
      if (!verdict.valid) throw new DeterministicFailure(`tool ${operation} returned structured content that does not fit its output schema: ${this.errorText(verdict.errorMessage ?? 'invalid')}`, {});
    }
    const result: Record<string, unknown> = { content: res.content ?? [] };
    if (res.structuredContent !== undefined) result.structuredContent = res.structuredContent;
    if (res.isError === true) {
      const text = (Array.isArray(res.content) ? res.content : [])
        .map((c) => (c as { type?: string; text?: string }).type === 'text' ? (c as { text: string }).text : '')
        .join(' ');
      const shown = this.errorText(text);
      throw new DeterministicFailure(`tool ${operation} reported an error${shown ? `: ${shown}` : ''}`, { result });
    }
    return result;
  }

  /**
   * A text the server wrote about a failure (an `isError` text, a JSON-RPC error message), as
   * svc passes it on: at most MAX_ERROR_TEXT long, since it goes into responses, stored
   * outcomes and canary status, and redacted before it is cut, as stderr lines are above.
   */
  private errorText(text: string): string {
    return cutText(this.redactor.redact(text), MAX_ERROR_TEXT);
  }

  /** Lists the server's tools now and reports required inputs our descriptors do not require. */
  async drift(signal: AbortSignal): Promise<DriftFinding[]> {
    const client = this.client;
    if (this.stateValue !== 'ready' || !client) throw new UpstreamError(`MCP server ${this.name} is not running (${this.stateValue})`);
    let upstream: Tool[];
    try {
      upstream = await this.listAll(client, signal);
    } catch (err) {
      throw new UpstreamError(`MCP server ${this.name}: tools/list failed: ${this.errorText((err as Error).message)}`);
    }
    const out: DriftFinding[] = [];
    for (const t of upstream) {
      const ours = this.list.get(t.name);
      if (!ours) continue;
      const known = new Set(requiredOf(ours.descriptor.input_schema));
      for (const field of requiredOf(t.inputSchema)) if (!known.has(field)) out.push({ tool: ours.descriptor.id, field });
    }
    return out;
  }

  async close(): Promise<void> {
    this.stateValue = 'closed';
    if (this.timer) clearTimeout(this.timer);
    this.clearStableTimer();
    this.timer = null;
    const client = this.client;
    const transport = this.transport;
    this.client = null;
    // Close first, then wait for a connect in progress: a server that has not answered
    // `initialize` would otherwise hold shutdown for the whole startup timeout (15 s), past
    // svcd's drain. Closing its transport ends the group now and fails that connect.
    await Promise.all([client?.close().catch(() => {}), transport?.close().catch(() => {})]);
    await this.connecting?.catch(() => {});
    await this.transport?.close().catch(() => {});
  }
}

/**
 * The gateway configuration (interface 2.10, decisions §9): a YAML or JSON document, `${VAR}`
 * substitution from the environment, environment overrides, and one JSON schema that reports
 * every problem at once (like changesets' config `parse()`), never just the first.
 *
 * Precedence, highest first: environment variable > config key > default. A `${VAR}` value is
 * registered with the redactor before anything else sees it, so it can never be printed.
 */
import { readFileSync } from 'node:fs';
import { fsReason } from '../util/fs-reason.js';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { ContractType } from '../types.js';
import { globalRedactor, type Redactor } from '../log/logger.js';
import { registerSecret } from '../log/secret-spellings.js';
import { formatAjvErrors, MAX_CANARY_INTERVAL_SECONDS } from './schema-validator.js';
import { validateGatewayConfig } from '../validators/compiled/gateway-config.js';
import { fetchBlockedPortHint, isFetchBlockedPort, urlHasFetchBlockedPort } from '../util/fetch-blocked-ports.js';
import { pointerToken } from '../encoding/json-pointer.js';
import { bearerTokenProblem, validHeaderName, validHeaderValue } from '../util/http-header-syntax.js';
import { yamlProblem } from '../util/yaml-problem.js';

/** What a tool entry of a connector may say (interface 2.10 `tools`). */
export interface ToolConfig {
  /** Human description shown in GET /v1/tools. */
  description?: string;
  /** True when the operation changes the upstream (sqlite: required for a write statement). */
  writes?: boolean;
  /** sqlite only: the named statement, with `:param` placeholders and `:now`. */
  statement?: string;
  /** JSON schema of the arguments. (Default: derived from the statement's parameters for sqlite) */
  input_schema?: Record<string, unknown>;
  /** Response fields the canary requires, with their JSON types. */
  contract?: { required: Record<string, ContractType> };
  /** Result fields that carry a data class (interface 5.5), e.g. {"email": "pii"}. */
  data_classes?: Record<string, string>;
}

/** A harmless call used by the canaries: `tool` is an operation of the connector (or its full id). */
export interface ProbeConfig {
  tool: string;
  args: Record<string, unknown>;
}

interface ConnectorBase {
  /** Connector name, the first half of every tool id. Lowercase letters, digits, `_` and `-`. */
  name: string;
  /** Operation → tool settings. */
  tools: Record<string, ToolConfig>;
  /** The canary probe. (Default: none; a connector without a probe is never quarantined) */
  probe: ProbeConfig | null;
  /** Upper bound on one upstream call, ms. (Default: 30000) */
  timeout_ms: number;
}

export interface SqliteConnectorConfig extends ConnectorBase {
  type: 'sqlite';
  /** The database file (absolute after load). */
  path: string;
}

export interface HttpConnectorConfig extends ConnectorBase {
  type: 'http';
  /** Hostnames the connector may call; `*.example.com` matches subdomains. */
  allowed_hosts: string[];
  /** Headers added to every request (credentials live here, usually through `${VAR}`). */
  headers: Record<string, string>;
  /** Largest response body kept, bytes. (Default: 5 MiB) */
  max_body_bytes: number;
}

export interface FsConnectorConfig extends ConnectorBase {
  type: 'fs';
  /** The directory every path must stay under (absolute after load). */
  root: string;
  /** Largest file `read` returns, bytes. (Default: 5 MiB) */
  max_file_bytes: number;
}

export interface McpConnectorConfig extends ConnectorBase {
  type: 'mcp';
  /** argv of the server: the program and its arguments. */
  command: string[];
  /** Extra environment of the server process (PATH, HOME, … are inherited). */
  env: Record<string, string>;
  /** Working directory of the server. (Default: the gateway's) */
  cwd: string | null;
}

export type ConnectorConfig = SqliteConnectorConfig | HttpConnectorConfig | FsConnectorConfig | McpConnectorConfig;
export type ConnectorType = ConnectorConfig['type'] | 'test';

export interface CanaryConfig {
  /** Seconds between probes of one connector. (Default: 60) */
  interval_seconds: number;
  /** Consecutive failed probes that quarantine a connector. (Default: 2) */
  quarantine_after: number;
  /** Release a quarantined connector after 2 consecutive passing probes. (Default: false) */
  auto_release: boolean;
}

/** The loaded, validated gateway configuration. */
export interface GatewayConfig {
  /** Listener address. (Default: 127.0.0.1:7402) */
  listen: string;
  /** Kernel address, for keys and run events. (Default: http://127.0.0.1:7401) */
  kernel_url: string;
  /** Bearer token of the listener, also sent to the kernel. (Default: null, loopback-only) */
  token: string | null;
  /** Directory of the idempotency store and the repair requests. (Default: ./gateway-data) */
  data_dir: string;
  /** Serve the `test.*` tools of decisions §9. (Default: false) */
  test_tools: boolean;
  canary: CanaryConfig;
  connectors: ConnectorConfig[];
  /** Where the config came from (a file's path), for the problems found when connectors start. */
  source?: string;
}

/** Every problem found while loading a config, each a line `<where>: <what>` (svcd's `kernel:` section too). */
export class ConfigError extends Error {
  constructor(
    readonly problems: string[],
    source: string,
    what = 'config',
  ) {
    super(`${what} ${source} has ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/** The gateway config's problems (interface 2.10). */
export class GatewayConfigError extends ConfigError {
  constructor(problems: string[], source: string) {
    super(problems, source, 'gateway config');
    this.name = 'GatewayConfigError';
  }
}

export const DEFAULT_LISTEN = '127.0.0.1:7402';
export const DEFAULT_KERNEL_URL = 'http://127.0.0.1:7401';
export const DEFAULT_DATA_DIR = './gateway-data';
export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_BYTES = 5 * 1024 * 1024;

export interface LoadOptions {
  /** Where the document came from, for messages and relative paths. (Default: "(inline)") */
  source?: string;
  /** Directory relative paths in the document resolve against. (Default: the file's, else cwd) */
  baseDir?: string;
  /** The environment for `${VAR}` and overrides. (Default: process.env) */
  env?: NodeJS.ProcessEnv;
  /** Where `${VAR}` values are registered. (Default: globalRedactor) */
  redactor?: Redactor;
}

/** Reads a YAML or JSON gateway config file and loads it. */
export function loadGatewayConfigFile(path: string, opts: Omit<LoadOptions, 'source'> = {}): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new GatewayConfigError([`cannot read the file: ${fsReason(err)}`], path);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new GatewayConfigError([`not valid YAML or JSON: ${yamlProblem(err)}`], path);
  }
  return loadGatewayConfig(doc ?? {}, { baseDir: dirname(resolve(path)), ...opts, source: path });
}

/**
 * Loads a parsed document (the whole gateway file, or svcd's `gateway:` section): substitutes
 * `${VAR}`, applies environment overrides, validates, and fills defaults. Throws one
 * GatewayConfigError listing every problem.
 */
export function loadGatewayConfig(doc: unknown, opts: LoadOptions = {}): GatewayConfig {
  const source = opts.source ?? '(inline)';
  const env = opts.env ?? process.env;
  const redactor = opts.redactor ?? globalRedactor;
  const baseDir = opts.baseDir ?? process.cwd();
  const problems: string[] = [];

  const substituted = substitute(doc, '', env, redactor, problems);
  const overridden = applyEnvOverrides(substituted, env, problems);

  const validate = validateGatewayConfig; // allErrors: every problem, not the first
  if (!validate(overridden)) problems.push(...formatAjvErrors(validate.errors ?? [], overridden));
  if (problems.length > 0) throw new GatewayConfigError(problems, source);

  const raw = overridden as RawConfig;
  registerLowerCasedHosts(raw, redactor);
  problems.push(...fsRootProblems(raw, baseDir));
  if (problems.length > 0) throw new GatewayConfigError(problems, source);
  const config = normalize(raw, baseDir);
  problems.push(...semanticProblems(config));
  if (problems.length > 0) throw new GatewayConfigError(problems, source);
  if (config.token) registerSecret(redactor, config.token);
  return { ...config, source };
}

/** Where each `${VAR}` value's spellings are worked out (re-exported: tests and callers name it here). */
export { registerSecret } from '../log/secret-spellings.js';

/**
 * An http connector's `allowed_hosts` are compared lower-cased, and every URL parser hands a
 * host on lower-cased: a host that shows a `${VAR}` value is registered in that spelling too
 * (the host whole, so no other lower-cased text is redacted for it).
 */
function registerLowerCasedHosts(raw: RawConfig, redactor: Redactor): void {
  for (const c of raw.connectors ?? []) {
    if (c.type !== 'http') continue;
    for (const host of c.allowed_hosts ?? []) {
      // `*.acme.example.com` matches hosts that end in `.acme.example.com`: that part is what shows.
      const shown = host.startsWith('*.') ? host.slice(2) : host;
      // `host` whole: one `${H}` may hold the entry, `*.` and all.
      if (shown !== shown.toLowerCase() && redactor.shows(host)) registerSecret(redactor, shown.toLowerCase());
    }
  }
}

const VAR = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{([^}]*)\}?/g;

/**
 * Replaces `${VAR}` in every string, map keys included (an http header name, an mcp env name);
 * `$${` is a literal `${`. Each value is registered with the redactor; problems (unset,
 * malformed) are pushed with their path, whose keys are JSON pointer tokens (a/b is a~1b). Also used for svcd's
 * `kernel:` section.
 */
export function substitute(value: unknown, path: string, env: NodeJS.ProcessEnv, redactor: Redactor, problems: string[]): unknown {
  if (typeof value === 'string') {
    if (!value.includes('${')) return value;
    return value.replace(VAR, (whole, name: string | undefined) => {
      if (whole === '$${') return '${';
      if (name === undefined) {
        // Quoted as written, closing brace and all, so the operator can search the file for it.
        problems.push(`${path || '/'}: "${whole}" is not a valid \${VAR} reference (a name of letters, digits and _, not starting with a digit; $\${ is a literal \${)`);
        return '';
      }
      const v = env[name];
      if (v === undefined) {
        problems.push(`${path || '/'}: environment variable ${name} is not set`);
        return whole; // keeps the value well-formed so the schema reports nothing extra
      }
      registerSecret(redactor, v);
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => substitute(v, `${path}/${i}`, env, redactor, problems));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const key = substitute(k, `${path}/${pointerToken(k)}`, env, redactor, problems) as string;
      // A header name comes back lower-cased (HTTP/2, Node's http): that spelling too.
      if (key !== k) registerSecret(redactor, key.toLowerCase());
      out[key] = substitute(v, `${path}/${pointerToken(k)}`, env, redactor, problems);
    }
    return out;
  }
  return value;
}

/** Interface 2.10: `1` enables, and only `1` (`true` or `yes` are refused, not guessed at). */
function flag(text: string): boolean | null {
  const t = text.trim();
  if (t === '1') return true;
  if (t === '0') return false;
  return null;
}

/** Environment wins over the file; a malformed value is a problem, not a silent default. */
function applyEnvOverrides(doc: unknown, env: NodeJS.ProcessEnv, problems: string[]): unknown {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return doc; // the schema reports it
  const out = { ...(doc as Record<string, unknown>) };
  const setCanary = (key: string, value: unknown) => {
    const cur = out.canary;
    if (cur !== undefined && (cur === null || typeof cur !== 'object' || Array.isArray(cur))) return; // reported by the schema
    out.canary = { ...((cur as Record<string, unknown>) ?? {}), [key]: value };
  };
  if (env.SVC_TOKEN) out.token = env.SVC_TOKEN;
  if (env.SVC_GATEWAY_DATA) out.data_dir = resolve(env.SVC_GATEWAY_DATA);
  if (env.SVC_CANARY_INTERVAL !== undefined && env.SVC_CANARY_INTERVAL !== '') {
    const n = Number(env.SVC_CANARY_INTERVAL);
    if (!Number.isFinite(n) || n <= 0 || n > MAX_CANARY_INTERVAL_SECONDS) problems.push(`SVC_CANARY_INTERVAL: must be a number of seconds above 0 and at most ${MAX_CANARY_INTERVAL_SECONDS} (24.8 days), got "${env.SVC_CANARY_INTERVAL}"`);
    else setCanary('interval_seconds', n);
  }
  if (env.SVC_CANARY_QUARANTINE_AFTER !== undefined && env.SVC_CANARY_QUARANTINE_AFTER !== '') {
    const n = Number(env.SVC_CANARY_QUARANTINE_AFTER);
    if (!Number.isSafeInteger(n) || n < 1) problems.push(`SVC_CANARY_QUARANTINE_AFTER: must be an integer of at least 1, got "${env.SVC_CANARY_QUARANTINE_AFTER}"`);
    else setCanary('quarantine_after', n);
  }
  for (const [name, apply] of [
    ['SVC_CANARY_AUTO_RELEASE', (b: boolean) => setCanary('auto_release', b)],
    ['SVC_GATEWAY_TEST_TOOLS', (b: boolean) => (out.test_tools = b)],
  ] as const) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    const b = flag(v);
    if (b === null) problems.push(`${name}: must be 1 or 0, got "${v}"`);
    else apply(b);
  }
  return out;
}

interface RawConnector {
  name: string;
  type: ConnectorConfig['type'];
  path?: string;
  root?: string;
  allowed_hosts?: string[];
  headers?: Record<string, string>;
  command?: string[];
  env?: Record<string, string>;
  cwd?: string;
  tools?: Record<string, ToolConfig>;
  probe?: { tool: string; args?: Record<string, unknown> };
  timeout_ms?: number;
  max_body_bytes?: number;
  max_file_bytes?: number;
}
interface RawConfig {
  listen?: string;
  kernel_url?: string | null;
  token?: string | null;
  data_dir?: string;
  test_tools?: boolean;
  canary?: Partial<CanaryConfig>;
  connectors?: RawConnector[];
}

/**
 * An fs connector names its directory as `root` or as `path`: interface 2.10's connector
 * definition has `path` as its one location key (sqlite's file), so a config written from the
 * interface alone may use it for an fs connector too. One of them, or both naming the same
 * directory once resolved.
 */
function fsRootProblems(raw: RawConfig, baseDir: string): string[] {
  const problems: string[] = [];
  (raw.connectors ?? []).forEach((c, i) => {
    if (c.type !== 'fs') return;
    if (c.root === undefined && c.path === undefined) problems.push(`/connectors/${i}/root: is required (the directory every path stays under; path is another name for it)`);
    else if (c.root !== undefined && c.path !== undefined && abs(c.root, baseDir) !== abs(c.path, baseDir)) problems.push(`/connectors/${i}/path: names another directory than root; give one of them`);
  });
  return problems;
}

function abs(p: string, baseDir: string): string {
  return isAbsolute(p) ? p : resolve(baseDir, p);
}

function normalize(raw: RawConfig, baseDir: string): GatewayConfig {
  const connectors = (raw.connectors ?? []).map((c): ConnectorConfig => {
    const base = {
      name: c.name,
      tools: c.tools ?? {},
      probe: c.probe ? { tool: c.probe.tool, args: c.probe.args ?? {} } : null,
      timeout_ms: c.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    };
    switch (c.type) {
      case 'sqlite':
        return { ...base, type: 'sqlite', path: abs(c.path!, baseDir) };
      case 'http':
        return { ...base, type: 'http', allowed_hosts: c.allowed_hosts!.map((h) => h.toLowerCase()), headers: c.headers ?? {}, max_body_bytes: c.max_body_bytes ?? DEFAULT_MAX_BYTES };
      case 'fs':
        return { ...base, type: 'fs', root: abs((c.root ?? c.path)!, baseDir), max_file_bytes: c.max_file_bytes ?? DEFAULT_MAX_BYTES };
      case 'mcp':
        return { ...base, type: 'mcp', command: c.command!, env: c.env ?? {}, cwd: c.cwd ? abs(c.cwd, baseDir) : null };
    }
  });
  // data_dir from SVC_GATEWAY_DATA was made absolute against the cwd, like any env path; the
  // file's own is relative to the file.
  const dataDir = raw.data_dir !== undefined ? abs(raw.data_dir, baseDir) : resolve(DEFAULT_DATA_DIR);
  return {
    listen: raw.listen ?? DEFAULT_LISTEN,
    kernel_url: (raw.kernel_url ?? DEFAULT_KERNEL_URL).replace(/\/+$/, ''),
    token: raw.token ?? null,
    data_dir: dataDir,
    test_tools: raw.test_tools ?? false,
    canary: {
      interval_seconds: raw.canary?.interval_seconds ?? 60,
      quarantine_after: raw.canary?.quarantine_after ?? 2,
      auto_release: raw.canary?.auto_release ?? false,
    },
    connectors,
  };
}

/** Checks the schema cannot express: unique names, probe targets, operation names per type, header syntax. */
function semanticProblems(config: GatewayConfig): string[] {
  const problems: string[] = [];
  if (urlHasFetchBlockedPort(config.kernel_url)) problems.push(`/kernel_url: ${fetchBlockedPortHint(config.kernel_url)}`);
  const tokenProblem = config.token === null ? null : bearerTokenProblem(config.token);
  if (tokenProblem !== null) problems.push(`/token: ${tokenProblem}`);
  const listenPort = /:(\d{1,5})$/.exec(config.listen)?.[1];
  if (listenPort !== undefined && isFetchBlockedPort(Number(listenPort))) {
    problems.push(`/listen: port ${listenPort} is one that fetch refuses to connect to (a "bad port" of the Fetch standard), so svc's clients could never reach it; choose another port`);
  }
  const seen = new Map<string, number>();
  config.connectors.forEach((c, i) => {
    const where = `/connectors/${i}`;
    if (seen.has(c.name)) problems.push(`${where}/name: "${c.name}" is already used by /connectors/${seen.get(c.name)}`);
    else seen.set(c.name, i);
    if (c.name === 'test' && config.test_tools) problems.push(`${where}/name: "test" is reserved for the test tools while SVC_GATEWAY_TEST_TOOLS is on`);
    const fixedOps = c.type === 'http' ? ['get', 'post'] : c.type === 'fs' ? ['read', 'list', 'write'] : null;
    for (const [op, t] of Object.entries(c.tools)) {
      if (fixedOps && !fixedOps.includes(op)) problems.push(`${where}/tools/${pointerToken(op)}: a ${c.type} connector has only the operations ${fixedOps.join(', ')}`);
      if (c.type === 'sqlite' && !t.statement) problems.push(`${where}/tools/${pointerToken(op)}: a sqlite tool needs a statement`);
      if (c.type !== 'sqlite' && t.statement !== undefined) problems.push(`${where}/tools/${pointerToken(op)}/statement: only sqlite tools have statements`);
      if (fixedOps && t.writes !== undefined && t.writes !== (op === 'post' || op === 'write')) {
        problems.push(`${where}/tools/${pointerToken(op)}/writes: ${c.type}.${op} ${op === 'post' || op === 'write' ? 'always writes' : 'never writes'}`);
      }
    }
    if (c.type === 'http') {
      // fetch would refuse them at every call: an operator's typo, not an upstream outage for
      // the breaker to count nor a caller's bad arguments. (The value may hold a secret: not shown.)
      for (const [name, value] of Object.entries(c.headers)) {
        if (!validHeaderName(name)) problems.push(`${where}/headers/${pointerToken(name)}: is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_\`|~ only)`);
        else if (!validHeaderValue(value)) problems.push(`${where}/headers/${pointerToken(name)}: the value holds a character a header cannot carry (a control character other than tab, or one above U+00FF)`);
      }
    }
    if (c.probe) {
      const op = probeOperation(c.name, c.probe.tool);
      if (c.type === 'sqlite' && !c.tools[op]) problems.push(`${where}/probe/tool: connector ${c.name} has no tool "${op}"`);
      else if (fixedOps && !fixedOps.includes(op)) problems.push(`${where}/probe/tool: a ${c.type} connector has only the operations ${fixedOps.join(', ')}`);
    }
  });
  return problems;
}

/** The operation a probe names: `op`, or the full id `<connector>.op`. */
export function probeOperation(connector: string, tool: string): string {
  return tool.startsWith(`${connector}.`) ? tool.slice(connector.length + 1) : tool;
}

/** An empty config with every default (svcd without a gateway config). */
export function defaultGatewayConfig(opts: LoadOptions = {}): GatewayConfig {
  // No file: what can be wrong is the environment's settings (SVC_CANARY_INTERVAL=soon).
  return loadGatewayConfig({}, { source: '(no file: defaults and the SVC_* environment)', ...opts });
}

/**
 * svcd configuration: a YAML or JSON file with `kernel:` and `gateway:` sections, flags, and
 * environment. Precedence (documented in man/svcd.8): flag > environment > file > default.
 *
 * The `kernel:` section is checked like the gateway's: `${VAR}` substituted from the
 * environment (values registered with the redactor), one schema, every problem listed at
 * once, and paths relative to the config file's directory.
 */
import { readFileSync } from 'node:fs';
import { fsReason } from '../src/util/fs-reason.js';
import { resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError, registerSecret, substitute } from '../src/gateway/config.js';
import { formatAjvErrors } from '../src/gateway/schema-validator.js';
import { MAX_CLOCK_SKEW_SECONDS, POSTGRES_URL_PATTERN } from '../src/kernel/config-schema.js';
import { validateKernelSection } from '../src/validators/compiled/kernel-config.js';
import { globalRedactor, type Redactor } from '../src/log/logger.js';
import type { SqliteSynchronous } from '../src/store/sqlite-db.js';
import { fetchBlockedPortHint, isFetchBlockedPort, urlHasFetchBlockedPort } from '../src/util/fetch-blocked-ports.js';
import { yamlProblem } from '../src/util/yaml-problem.js';

export interface KernelFileConfig {
  /** Listener address. (Default: 127.0.0.1:7401) */
  listen?: string;
  /** Data directory of the store and keys, relative to the config file. (Default: ./svc-data) */
  data_dir?: string;
  /** Bearer token; SVC_TOKEN wins. (Default: null, loopback-only) */
  token?: string | null;
  /** Publisher keys trusted for bundles. */
  publishers?: Array<{ key_id: string; public_key: string }>;
  /** SQLite PRAGMA synchronous. (Default: FULL) */
  synchronous?: SqliteSynchronous;
  /** The kernel's store: a postgres:// URL for PostgreSQL. (Default: SQLite, kernel.db in data_dir) */
  store?: string | null;
  /** Allowed clock skew for remit validity, seconds. (Default: 0) */
  clock_skew_seconds?: number;
  /** Gateway address for tool descriptors when the gateway runs in another process; SVC_GATEWAY_URL wins. Null: the default. */
  gateway_url?: string | null;
}

export interface SvcdFileConfig {
  kernel?: KernelFileConfig;
  gateway?: Record<string, unknown>;
}

export { MAX_CLOCK_SKEW_SECONDS, POSTGRES_URL_PATTERN } from '../src/kernel/config-schema.js';

/**
 * A --store or kernel.store value checked, its password (if any) registered with the
 * redactor so that no log line shows it; null: the SQLite store (the default).
 */
export function kernelStoreOf(value: string | null | undefined, source: string, redactor: Redactor = globalRedactor): string | null {
  if (value === undefined || value === null) return null;
  if (!new RegExp(POSTGRES_URL_PATTERN).test(value)) throw new Error(`${source} "${value}" must be a postgres:// URL (the SQLite store needs no setting: it is kernel.db in the data directory)`);
  let password = '';
  try {
    password = decodeURIComponent(new URL(value).password);
  } catch {
    throw new Error(`${source} is not a valid URL`);
  }
  if (password) registerSecret(redactor, password);
  return value;
}

/** A YAML or JSON file, parsed and nothing more; its errors name it. */
export function readConfigDoc(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read config ${path}: ${fsReason(err)}`);
  }
  try {
    return parseYaml(text);
  } catch (err) {
    throw new Error(`config ${path} is not valid YAML or JSON: ${yamlProblem(err)}`);
  }
}

/** Reads a YAML or JSON config file; errors name the file and every problem of `kernel:`. */
export function readConfigFile(path: string, env: NodeJS.ProcessEnv = process.env, redactor: Redactor = globalRedactor): SvcdFileConfig {
  const value = readConfigDoc(path);
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new Error(`config ${path} must be a mapping with kernel: and gateway: sections`);
  const cfg = value as Record<string, unknown>;
  const unknown = Object.keys(cfg).filter((key) => key !== 'kernel' && key !== 'gateway');
  if (unknown.length > 0) throw new Error(`config ${path}: unknown top-level key${unknown.length === 1 ? '' : 's'} ${unknown.map((k) => `"${k}"`).join(', ')} (expected kernel, gateway)`);
  const out: SvcdFileConfig = { gateway: cfg.gateway as Record<string, unknown> | undefined };
  if (cfg.kernel !== undefined && cfg.kernel !== null) out.kernel = kernelSection(cfg.kernel, `${path} (kernel:)`, resolve(path, '..'), env, redactor);
  return out;
}

/** Checks the `kernel:` section: `${VAR}`, the schema, the listen address; data_dir made absolute. */
export function kernelSection(doc: unknown, source: string, baseDir: string, env: NodeJS.ProcessEnv = process.env, redactor: Redactor = globalRedactor): KernelFileConfig {
  const problems: string[] = [];
  const value = substitute(doc, '', env, redactor, problems);
  if (!validateKernelSection(value)) problems.push(...formatAjvErrors(validateKernelSection.errors ?? []));
  const k = (problems.length === 0 ? value : {}) as KernelFileConfig;
  if (typeof k.listen === 'string') {
    try {
      parseListen(k.listen);
    } catch (err) {
      problems.push(`/listen: ${(err as Error).message}`);
    }
  }
  if (typeof k.gateway_url === 'string' && urlHasFetchBlockedPort(k.gateway_url)) problems.push(`/gateway_url: ${fetchBlockedPortHint(k.gateway_url)}`);
  if (problems.length > 0) throw new ConfigError(problems, source);
  if (k.token) registerSecret(redactor, k.token);
  if (typeof k.store === 'string') kernelStoreOf(k.store, `${source} /store`, redactor);
  return { ...k, ...(k.data_dir !== undefined ? { data_dir: resolve(baseDir, k.data_dir) } : {}) };
}

/** Splits "host:port" (IPv6 in brackets); port 0 picks a free one. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value.trim());
  if (!m) {
    // An IPv6 address holds colons itself: it goes in brackets, as in a URL.
    const v6 = /^([0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*):(\d{1,5})$/.exec(value.trim());
    const hint = v6 ? `; an IPv6 address goes in brackets: [${v6[1]}]:${v6[2]}` : '';
    throw new Error(`listen address "${value}" must be HOST:PORT${hint}`);
  }
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`listen address "${value}": port out of range`);
  if (isFetchBlockedPort(port)) {
    throw new Error(`listen address "${value}": port ${port} is one that fetch refuses to connect to (a "bad port" of the Fetch standard), so svc, its workers and its gateway could never reach it; choose another port`);
  }
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

/** A whole number of seconds from 0 to `max` named by `source` (a flag or a variable), or an error; unset is `fallback`. */
export function wholeSecondsOf(value: string | undefined, source: string, max: number, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  if (!/^\d+$/.test(value) || Number(value) > max) throw new Error(`${source} "${value}" must be a whole number of seconds from 0 to ${max}`);
  return Number(value);
}

/** Longest drain: an hour (decisions §11 leaves it open; a supervisor's grace is shorter). */
export const MAX_DRAIN_SECONDS = 3600;

/**
 * svcd configuration: a YAML or JSON file with `kernel:` and `gateway:` sections, flags, and
 * environment. Precedence (documented in man/svcd.8): flag > environment > file > default.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { SqliteSynchronous } from '../src/store/sqlite-db.js';

export interface KernelFileConfig {
  /** Listener address. (Default: 127.0.0.1:7401) */
  listen?: string;
  /** Data directory of the store and keys. (Default: ./svc-data) */
  data_dir?: string;
  /** Bearer token; SVC_TOKEN wins. (Default: null, loopback-only) */
  token?: string | null;
  /** Publisher keys trusted for bundles. */
  publishers?: Array<{ key_id: string; public_key: string }>;
  /** SQLite PRAGMA synchronous. (Default: FULL) */
  synchronous?: SqliteSynchronous;
  /** Allowed clock skew for remit validity, seconds. (Default: 0) */
  clock_skew_seconds?: number;
  /** Gateway address for tool descriptors when the gateway runs in another process; SVC_GATEWAY_URL wins. */
  gateway_url?: string;
}

export interface SvcdFileConfig {
  kernel?: KernelFileConfig;
  gateway?: Record<string, unknown>;
}

/** Reads a YAML or JSON config file; errors name the file. */
export function readConfigFile(path: string): SvcdFileConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot read config ${path}: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (err) {
    throw new Error(`config ${path} is not valid YAML or JSON: ${(err as Error).message}`);
  }
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new Error(`config ${path} must be a mapping with kernel: and gateway: sections`);
  const cfg = value as Record<string, unknown>;
  for (const key of Object.keys(cfg)) {
    if (key !== 'kernel' && key !== 'gateway') throw new Error(`config ${path}: unknown top-level key "${key}" (expected kernel, gateway)`);
  }
  return cfg as SvcdFileConfig;
}

/** Splits "host:port" (IPv6 in brackets); port 0 picks a free one. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value.trim());
  if (!m) throw new Error(`listen address "${value}" must be HOST:PORT`);
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`listen address "${value}": port out of range`);
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

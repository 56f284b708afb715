/**
 * A JSON value given on the command line: inline, `@FILE` or `@-` (stdin), as `--input` and
 * `--args` take it. Exit codes follow svc(1): a wrong command line is a usage error (2); a file
 * that cannot be read or does not hold what it should is a failed operation (1), as it is for
 * every other file the CLI reads (bundles, policies, keys).
 */
import { readFileSync } from 'node:fs';
import { CliError, EXIT, fsReason } from './exit.js';

export type ReadFile = (path: string) => string;

const readFromDisk: ReadFile = (p) => readFileSync(p === '-' ? 0 : p, 'utf8');

export interface JsonArgumentOptions {
  /** The flag, for messages: `--input`. */
  flag: string;
  /** Refuse anything but a JSON object. */
  object?: boolean;
  readFile?: ReadFile;
}

export function jsonArgument(value: string, opts: JsonArgumentOptions): unknown {
  let text = value;
  let where = opts.flag;
  let exitCode: number = EXIT.usage;
  if (value.startsWith('@')) {
    const path = value.slice(1);
    if (path === '') throw new CliError(`${opts.flag} @ needs a file name after the @ (@FILE, or @- for standard input)`, EXIT.usage);
    where = path === '-' ? 'stdin' : path;
    exitCode = EXIT.failed;
    try {
      text = (opts.readFile ?? readFromDisk)(path);
    } catch (err) {
      throw new CliError(`cannot read ${where}: ${fsReason(err)}`, EXIT.failed);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CliError(`${where} is not JSON: ${(err as Error).message}`, exitCode);
  }
  if (opts.object && (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))) {
    throw new CliError(`${where} must be a JSON object`, exitCode);
  }
  return parsed;
}

/**
 * YAML and JSON files as the commands read them (bundles, key files, policy corpora), their
 * numbers made JSON's. Apart from cli/commands/bundle.ts, which re-exports what it exported
 * before, so that `svc policy` and `svc keys` load the YAML parser without the bundle validator
 * (docs/design.md, "CLI start-up").
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { BundleProblem } from '../../src/bundle/validate.js';
import { integerReadAs } from '../../src/encoding/json-limits.js';
import { pointerToken } from '../../src/encoding/json-pointer.js';
import { hasLoneSurrogate } from '../../src/encoding/well-formed-json.js';
import { yamlProblem } from '../../src/util/yaml-problem.js';
import { CliError, EXIT, fsReason } from '../exit.js';

/** Reads a YAML or JSON file; failures name the file (exit 1), the first value JSON cannot carry too. */
export function readDataFile(file: string): unknown {
  const { value, problems } = readDataFileProblems(file);
  if (problems.length > 0) throw new UnparsableFileError(file, problems[0]!.message, problems[0]!.path);
  return value;
}

/**
 * Reads a YAML or JSON file, with every value JSON cannot carry listed (each stands in the value
 * as a number JSON can, so a validator goes on to find the file's other problems). A file that
 * cannot be read or parsed throws, as readDataFile.
 */
export function readDataFileProblems(file: string): { value: unknown; problems: BundleProblem[] } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${fsReason(err)}`, EXIT.failed);
  }
  let value: unknown;
  try {
    // Integers as BigInt, so one that a JSON number cannot hold exactly is found, not rounded.
    value = parseYaml(text, { prettyErrors: true, intAsBigInt: true });
  } catch (err) {
    // yaml's first line ends in ':' before its excerpt of the source, which one line has no room for.
    throw new UnparsableFileError(file, `not valid YAML or JSON: ${yamlProblem(err)}`);
  }
  const problems: BundleProblem[] = [];
  return { value: jsonNumbers(value, '', problems), problems };
}

/**
 * `value` with YAML's numbers made JSON's: an integer becomes a number when that does not
 * change it (`integerReadAs`, the rule svcd applies to request bodies); one it would change,
 * and `.nan` / `.inf` (or a JSON `1e400`), is a problem at its pointer. What is signed must
 * be what was written, and JCS has no NaN or Infinity. A string or member name holding a lone
 * surrogate is a problem too: canonical JSON cannot carry it, and svcd refuses the body.
 */
function jsonNumbers(value: unknown, path: string, problems: BundleProblem[]): unknown {
  if (typeof value === 'bigint') {
    const n = Number(value);
    if (!Number.isFinite(n)) {
      problems.push({ path, message: `the integer ${shortDigits(value)} is out of range for a JSON number` });
      return 0;
    }
    const read = integerReadAs(value.toString());
    if (read !== null) problems.push({ path, message: `the integer ${shortDigits(value)} is past what a JSON number holds exactly (it would be signed as ${read}); quote it to keep it as text` });
    return n;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) {
    problems.push({ path, message: `${value} is not a number JSON can carry` });
    return 0;
  }
  if (typeof value === 'string' && hasLoneSurrogate(value)) problems.push({ path, message: `the string ${LONE_SURROGATE}` });
  if (Array.isArray(value)) return value.map((v, i) => jsonNumbers(v, `${path}/${i}`, problems));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    // defineProperty: an own `__proto__` member (YAML keeps it as one) stays a member, as signed.
    for (const [k, v] of Object.entries(value)) {
      if (hasLoneSurrogate(k)) problems.push({ path: `${path}/${pointerToken(k)}`, message: `the member name ${LONE_SURROGATE}` });
      Object.defineProperty(out, k, { value: jsonNumbers(v, `${path}/${pointerToken(k)}`, problems), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return value;
}

const LONE_SURROGATE = 'holds a lone surrogate (\\ud800 to \\udfff without its pair), which canonical JSON cannot carry';

/** An integer's digits, cut in the middle past 40 (a 400-digit number in a message helps nobody). */
function shortDigits(v: bigint): string {
  const t = v.toString();
  return t.length <= 40 ? t : `${t.slice(0, 20)}…${t.slice(-10)} (${t.replace('-', '').length} digits)`;
}

/**
 * A file that was read but does not parse, or holds a value JSON cannot carry: a problem of
 * the file at `path` (svc bundle validate lists it as one).
 */
export class UnparsableFileError extends CliError {
  constructor(
    file: string,
    readonly reason: string,
    readonly path = '',
  ) {
    super(path ? `${file}: ${path}: ${reason}` : `${file} is ${reason}`, EXIT.failed);
  }
}

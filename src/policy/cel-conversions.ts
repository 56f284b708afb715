/**
 * CEL's conversions from a string, read as the CEL reference implementation (cel-go) reads
 * them: `int` and `uint` base-10 only (`int` with an optional sign, `uint` with none), `double`
 * decimal notation or Inf/Infinity/NaN, `timestamp` RFC 3339, `duration` Go's duration syntax.
 * cel-js is more lenient: it reads `int("")` and `uint("")` as 0, "0b101", "0o17" and "0X1F" as
 * numbers, `uint("-0")` and `uint("+5")`, `double("0x10")` as 16 and an overflowing double as
 * ±Infinity, any text JS `Date` can read as a timestamp (an RFC 1123 date in the server's time
 * zone, February 30 as March 2), and "s" as a zero duration. A condition reading a worker's
 * string through such a conversion decided on a made-up value instead of failing closed
 * (decisions 5.1): `deny e when int(action.summary) > 3` allowed an empty summary.
 *
 * Each parser returns the value or throws the CEL evaluation error; the values it accepts it
 * reads exactly as cel-js does. Error messages never quote the input (a worker's text, up to a
 * MiB). Hex floats (Go's "0x1p-2"), which CEL's own literals lack and implementations disagree
 * on, are errors.
 */
import { EvaluationError } from '@marcbachmann/cel-js';

function conversionError(fn: string, why: string): EvaluationError {
  return new EvaluationError({ code: `${fn}_conversion_error`, message: `${fn}() conversion error: ${why}` });
}

const INT64_MAX = (1n << 63n) - 1n;
const INT64_MIN = -(1n << 63n);
const UINT64_MAX = (1n << 64n) - 1n;

/** Digits without their leading zeros; at most `max` of them (longer is out of range anyway). */
function significant(digits: string, max: number): string | null {
  let i = 0;
  while (i < digits.length - 1 && digits.charCodeAt(i) === 48) i++;
  return digits.length - i > max ? null : digits.slice(i);
}

/** `int(string)`: `[+-]?[0-9]+` within 64 bits (Go's strconv.ParseInt(s, 10, 64)). */
export function celIntFromString(s: string): bigint {
  const m = /^([+-]?)([0-9]+)$/.exec(s);
  if (!m) throw conversionError('int', 'not a base-10 integer');
  const digits = significant(m[2]!, 19);
  const n = digits === null ? null : BigInt(m[1] === '-' ? `-${digits}` : digits);
  if (n === null || n > INT64_MAX || n < INT64_MIN) throw conversionError('int', 'out of the int range');
  return n;
}

/**
 * `int(double)`: truncated toward zero, an error outside the int range, as cel-go's
 * doubleToInt64Checked (−2^63 itself is refused too, as there). cel-js gives any finite double
 * an unbounded int (int(1e30) = 10^30), so an allow rule could match on a value CEL has no int for.
 */
export function celIntFromDouble(d: number): number {
  if (!(d > -(2 ** 63) && d < 2 ** 63)) throw conversionError('int', 'out of the int range');
  return d;
}

/** `uint(string)`: `[0-9]+` within 64 bits, no sign (Go's strconv.ParseUint(s, 10, 64)). */
export function celUintFromString(s: string): bigint {
  if (!/^[0-9]+$/.test(s)) throw conversionError('uint', 'not a base-10 unsigned integer');
  const digits = significant(s, 20);
  const n = digits === null ? null : BigInt(digits);
  if (n === null || n > UINT64_MAX) throw conversionError('uint', 'out of the uint range');
  return n;
}

const DECIMAL = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;

/** `double(string)`: decimal notation, or Inf/Infinity (signed) and NaN in any case; no overflow to ±Inf. */
export function celDoubleFromString(s: string): number {
  const special = /^([+-]?)(inf|infinity)$/i.exec(s);
  if (special) return special[1] === '-' ? -Infinity : Infinity;
  if (/^nan$/i.test(s)) return NaN;
  if (!DECIMAL.test(s)) throw conversionError('double', 'not a decimal number');
  const n = Number(s);
  if (!Number.isFinite(n)) throw conversionError('double', 'out of the double range');
  return n;
}

/** The timestamps CEL has: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z (in ms, as cel-js keeps them). */
const MIN_TIMESTAMP_MS = -62135596800000;
const MAX_TIMESTAMP_MS = 253402300799999;

const RFC3339 = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(?:Z|([+-])([0-9]{2}):([0-9]{2}))$/;

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * `timestamp(string)`: RFC 3339 as Go's time.Parse(time.RFC3339) reads it (upper-case T and Z,
 * a real calendar date, seconds 0–59, offsets under 24 h), in CEL's range. Milliseconds since
 * the epoch: cel-js keeps timestamps as JS Dates, finer digits are dropped as it drops them.
 */
export function celTimestampFromString(s: string): number {
  const m = RFC3339.exec(s);
  if (!m) throw conversionError('timestamp', 'not an RFC 3339 timestamp');
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const offset = m[8] === undefined ? 0 : (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10]));
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59) {
    throw conversionError('timestamp', 'not a valid date and time');
  }
  if (m[8] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) throw conversionError('timestamp', 'not a valid time zone offset');
  const ms = Number((m[7] ?? '').slice(0, 3).padEnd(3, '0'));
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day); // not Date.UTC: it reads years 0–99 as 1900–1999
  d.setUTCHours(hour, minute, second, ms);
  const t = d.getTime() - offset * 60_000;
  if (t < MIN_TIMESTAMP_MS || t > MAX_TIMESTAMP_MS) throw conversionError('timestamp', 'out of the timestamp range');
  return t;
}

const NANOS_PER_UNIT: ReadonlyMap<string, bigint> = new Map([
  ['ns', 1n],
  ['us', 1_000n],
  ['\u00b5s', 1_000n], // micro sign
  ['\u03bcs', 1_000n], // Greek mu
  ['ms', 1_000_000n],
  ['s', 1_000_000_000n],
  ['m', 60_000_000_000n],
  ['h', 3_600_000_000_000n],
]);

const isDigit = (c: number) => c >= 48 && c <= 57;
const DOT = 46;
const LIMIT = 1n << 63n;

/**
 * `duration(string)`: Go's time.ParseDuration, step for step: an optional sign, then numbers
 * with an optional fraction, each followed by a unit (ns, us, µs, ms, s, m, h), or "0"; within
 * ±2^63 ns. Nanoseconds.
 */
export function celDurationFromString(s: string): bigint {
  const invalid = () => conversionError('duration', 'not a duration such as "1h30m" or "-1.5s"');
  let i = 0;
  const n = s.length;
  let neg = false;
  if (n > 0 && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-';
    i = 1;
  }
  if (s.slice(i) === '0') return 0n;
  if (i === n) throw invalid();
  let total = 0n;
  while (i < n) {
    if (!(s.charCodeAt(i) === DOT || isDigit(s.charCodeAt(i)))) throw invalid();
    let v = 0n;
    const intStart = i;
    for (; i < n && isDigit(s.charCodeAt(i)); i++) {
      v = v * 10n + BigInt(s.charCodeAt(i) - 48);
      if (v > LIMIT) throw conversionError('duration', 'out of the duration range');
    }
    const pre = i > intStart;
    let f = 0n;
    let scale = 1;
    let post = false;
    if (i < n && s.charCodeAt(i) === DOT) {
      i++;
      const fracStart = i;
      let overflow = false;
      for (; i < n && isDigit(s.charCodeAt(i)); i++) {
        if (overflow) continue;
        const y = f * 10n + BigInt(s.charCodeAt(i) - 48);
        if (f > (LIMIT - 1n) / 10n || y > LIMIT) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      post = i > fracStart;
    }
    if (!pre && !post) throw invalid();
    const unitStart = i;
    while (i < n && !(s.charCodeAt(i) === DOT || isDigit(s.charCodeAt(i)))) i++;
    const unit = NANOS_PER_UNIT.get(s.slice(unitStart, i));
    if (unit === undefined) throw invalid();
    if (v > LIMIT / unit) throw conversionError('duration', 'out of the duration range');
    v *= unit;
    if (f > 0n) {
      // float64(f) * (float64(unit) / scale), truncated: Go's rounding, not an exact one.
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
      if (v > LIMIT) throw conversionError('duration', 'out of the duration range');
    }
    total += v;
    if (total > LIMIT) throw conversionError('duration', 'out of the duration range');
  }
  if (neg) return -total;
  if (total > LIMIT - 1n) throw conversionError('duration', 'out of the duration range');
  return total;
}

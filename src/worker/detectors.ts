/**
 * Built-in detectors of the data boundary (interface 5.5): content that is personal (`pii`) or
 * payment-card (`pci`) data wherever it appears, whatever the field is called. Each detector is
 * a global regular expression plus an optional validator, so false positives stay rare:
 * card numbers must carry a card-network prefix and pass Luhn; SSNs exclude the ranges the SSA never issues and need one kind of separator;
 * phones need separators or a leading `+` (a national number: its leading 0 and a separator).
 */

/** One kind of sensitive content and the class it belongs to. */
export interface Detector {
  /** Short name, e.g. `email`. */
  name: string;
  /** The data class this content belongs to (`pii`, `pci`). */
  class: string;
  /** A global regex finding candidates. */
  pattern: RegExp;
  /** Finds candidates itself instead of `pattern` (for overlapping candidates). */
  find?: (text: string) => Array<{ start: number; end: number }>;
  /** Confirms a candidate (e.g. Luhn). (Default: every candidate counts) */
  validate?: (match: string) => boolean;
  /**
   * Reads form and URL encodings of digit separators: `%20`, `%2B`, `%2D`, and with `'plus'`
   * a `+` between digits as a space too (a form body's `4111+1111+…`). Only for content whose
   * own spelling never has them: an email's local part may (`john2024+1@…`, `a%20b@…`), and a
   * `+` between digits is also a sum next to phone-shaped numbers.
   */
  encoded?: 'percent' | 'plus';
}

/** One detected value inside a text. */
export interface Finding {
  detector: string;
  class: string;
  start: number;
  end: number;
  value: string;
}

/** Luhn checksum over the digits of `s` (separators ignored). */
export function luhnValid(s: string): boolean {
  const digits = s.replace(/\D/g, '');
  if (digits.length === 0) return false;
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/** Issuer prefixes of the card networks (Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay). */
function hasCardPrefix(digits: string): boolean {
  if (digits.startsWith('4')) return true; // Visa
  const two = Number(digits.slice(0, 2));
  const four = Number(digits.slice(0, 4));
  const three = Number(digits.slice(0, 3));
  if (two >= 51 && two <= 55) return true; // Mastercard
  if (four >= 2221 && four <= 2720) return true; // Mastercard 2-series
  if (two === 34 || two === 37) return true; // Amex
  if (digits.startsWith('6011') || two === 65 || (three >= 644 && three <= 649)) return true; // Discover
  if (two === 35) return true; // JCB
  if (two === 36 || two === 38 || two === 39 || (three >= 300 && three <= 305)) return true; // Diners
  if (two === 62) return true; // UnionPay
  return false;
}

/** The longest a card number can be written: 19 digits and a separator between each two. */
const MAX_CARD_CHARS = 19 + 18;
/** The first digits of the card-network prefixes in hasCardPrefix. */
const CARD_FIRST_DIGITS = '23456';

/** Characters that group the digits of a written card number. */
const CARD_SEPARATORS = ' -.';

/**
 * Card candidates: in each run of digits joined by at most single spaces, dashes or dots, the
 * longest valid card number that starts at the run's start or after a separator and ends at
 * the run's end or before one (so "0 4111 1111 1111 1111" still yields the card, while a
 * card-shaped window in the middle of a longer bare number does not).
 */
export function findCardNumbers(text: string): Array<{ start: number; end: number }> {
  const out: Array<{ start: number; end: number }> = [];
  for (const m of text.matchAll(/(?<![\d])\d(?:[ .-]?\d)*/g)) {
    const run = m[0];
    const base = m.index!;
    const starts: number[] = [0];
    const ends: number[] = [];
    // digitsBefore[i]: digits in run[0, i), so a window's digit count costs one subtraction.
    const digitsBefore = new Int32Array(run.length + 1);
    for (let i = 0; i < run.length; i++) {
      const sep = CARD_SEPARATORS.includes(run[i]!);
      digitsBefore[i + 1] = digitsBefore[i]! + (sep ? 0 : 1);
      if (sep) {
        ends.push(i);
        starts.push(i + 1);
      }
    }
    ends.push(run.length);
    let from = 0;
    // Only ends within a card's length of the start can close one: a run of thousands of
    // `1-1-1-…` would otherwise try every pair (quadratic). `within` moves forward only.
    let within = 0;
    for (const st of starts) {
      if (st < from) continue;
      while (within < ends.length && ends[within]! <= st + MAX_CARD_CHARS) within++;
      if (!CARD_FIRST_DIGITS.includes(run[st]!)) continue; // no network starts with 0, 1, 7, 8 or 9
      for (let k = within - 1; k >= 0; k--) {
        const en = ends[k]!;
        if (en <= st) break;
        const digits = digitsBefore[en]! - digitsBefore[st]!;
        if (digits < 13) break; // shorter still from here on
        if (digits > 19) continue;
        if (isCardNumber(run.slice(st, en))) {
          out.push({ start: base + st, end: base + en });
          from = en;
          break;
        }
      }
    }
  }
  return out;
}

/** Group lengths of cards printed with dots: 4-4-4-4 (and 19 digits as 4-4-4-4-3), Amex 4-6-5, Diners 4-6-4. */
const DOTTED_CARD_GROUPS = new Set(['4.4.4.4', '4.4.4.4.3', '4.6.5', '4.6.4']);

/**
 * A card number as people write it: 13–19 digits, bare or grouped by spaces and dashes, or by
 * dots in the groups cards are printed in. Dots elsewhere are OIDs (1.3.6.1.4.1.1466…),
 * versions and decimals, never cards; dots beside other separators are lists of numbers.
 */
export function isCardNumber(candidate: string): boolean {
  if (candidate.includes('.')) {
    if (/[ -]/.test(candidate)) return false;
    if (!DOTTED_CARD_GROUPS.has(candidate.split('.').map((g) => g.length).join('.'))) return false;
  }
  const digits = candidate.replace(/[ .-]/g, '');
  if (!/^\d{13,19}$/.test(digits)) return false;
  return hasCardPrefix(digits) && luhnValid(digits);
}

/** The detectors applied to every string (and number) that goes to a model provider. */
export const BUILTIN_DETECTORS: readonly Detector[] = Object.freeze([
  {
    name: 'card_number',
    class: 'pci',
    // 13–19 digits, optionally grouped by single spaces, dashes or dots.
    pattern: /(?<![\d-])\d(?:[ .-]?\d){12,18}(?![\d])/g,
    find: findCardNumbers,
    validate: isCardNumber,
    encoded: 'plus',
  },
  {
    name: 'email',
    class: 'pii',
    // The lookbehind starts a candidate only where a run of local-part characters starts:
    // without it a long run with no `@` is rescanned from every position (quadratic: 40,000
    // letters took 3 s and blocked the worker's heartbeats). The `@` may be percent-encoded,
    // as in a link, a Location header or a form body (`?email=dana%40corp.example`).
    // Letters and digits of any script (RFC 6531: `dänä@bücher.de`), with combining marks.
    pattern: /(?<![\p{L}\p{M}\p{N}._%+'-])[\p{L}\p{M}\p{N}._%+'-]+(?:@|%40)[\p{L}\p{M}\p{N}-]+(?:\.[\p{L}\p{M}\p{N}-]+)*\.[\p{L}\p{M}]{2,}/gu,
  },
  {
    name: 'us_ssn',
    class: 'pii',
    encoded: 'percent',
    // AAA-GG-SSSS, AAA.GG.SSSS, or AAA GG SSSS not inside a longer row of spaced numbers
    // ("512 64 1024 2048" is a column of sizes); bare nine digits are too common.
    pattern: /(?<![\d-])(?:(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}|(?<![\d.])(?!000|666|9\d\d)\d{3}\.(?!00)\d{2}\.(?!0000)\d{4}(?!\.\d)|(?<!\d\x20)(?!000|666|9\d\d)\d{3}\x20(?!00)\d{2}\x20(?!0000)\d{4}(?!\x20\d))(?![\d-])/g,
  },
  {
    name: 'uk_nino',
    class: 'pii',
    // Either case: people type "ab123456c" as often as HMRC prints "AB 12 34 56 C".
    // Grouped by spaces or dashes (AB-12-34-56-C), or not at all.
    pattern: /(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z][ -]?\d{2}[ -]?\d{2}[ -]?\d{2}[ -]?[A-D](?![A-Za-z0-9])/gi,
  },
  {
    name: 'phone',
    class: 'pii',
    encoded: 'percent',
    // +CC then 7–14 more digits with optional separators; North American (NXX) NXX-XXXX; or a
    // national number written with its trunk prefix 0 (or the international prefix 00): after
    // a parenthesised area code, (030) 1234 5678; or with one separator used throughout,
    // 020 7946 0958, 07700 900123, 01 23 45 67 89. A mixed run such as a date and a time
    // (01.02.2026 10:30) is not one number.
    pattern:
      /(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}|(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}|\(0{1,2}[1-9]\d{0,3}\) ?\d{2,8}(?:[ .-]\d{2,8}){0,3}|0{1,2}[1-9]\d{0,3}([ .-])\d{2,8}(?:\1\d{2,8}){0,3})(?: ?(?:[xX]|[eE][xX][tT]\.?) ?\d{1,6})?(?![\w]|[.:-]\d)/g,
    validate: (match) => {
      // An extension (415-555-0100x23, "ext. 23") is withheld with the number, not counted in it.
      const m = match.replace(/ ?(?:[xX]|[eE][xX][tT]\.?) ?\d{1,6}$/, '');
      const digits = m.replace(/\D/g, '').length;
      // A national number is 9–12 digits with its 0 (dates such as 01.02.2026 have 8).
      if (/^\(?0/.test(m)) return digits >= 9 && digits <= (m.replace(/^\(/, '').startsWith('00') ? 15 : 12);
      return digits >= 8 && digits <= 15;
    },
  },
]);

/**
 * Each pattern as the global regex matchAll needs, made once. A copy of our own even when the
 * pattern is global already: matchAll starts at its argument's lastIndex, which no other
 * caller's exec or test moves on this one.
 */
const GLOBAL = new WeakMap<RegExp, RegExp>();
function globalOf(pattern: RegExp): RegExp {
  let re = GLOBAL.get(pattern);
  if (re === undefined) {
    re = new RegExp(pattern.source, pattern.flags.includes('g') ? pattern.flags : pattern.flags + 'g');
    GLOBAL.set(pattern, re);
  }
  return re;
}

/**
 * Characters read one for one (offsets unchanged): full-width forms as their ASCII (Japanese
 * text writes ０９０－１２３４－５６７８), the ideographic space and tab as a space, hyphens
 * and dashes (the non-breaking hyphen U+2011, en dash, minus sign) as `-`; and, for the
 * detectors that ask (`encoded: 'plus'`), a `+` between digits as a space.
 */
const ONE_FOR_ONE = /[\uff01-\uff5e\u3000\t\u2010-\u2014\u2212\ufe63]/g;
const ONE_FOR_ONE_PLUS = new RegExp(`${ONE_FOR_ONE.source}|(?<=\\d)\\+(?=\\d)`, 'g');

function oneForOne(ch: string): string {
  const code = ch.charCodeAt(0);
  if (code >= 0xff01 && code <= 0xff5e) return String.fromCharCode(code - 0xfee0);
  if (ch === '\u3000' || ch === '\t' || ch === '+') return ' ';
  return '-';
}

/**
 * Spaces that group digits as a space does: no-break (French and Swiss number formatting),
 * figure, thin and narrow no-break, as characters or as the HTML entities an http tool's raw
 * body carries (`&nbsp;`, `&#160;`, `&#xA0;`, …), and for the detectors that ask, `%20`; a
 * run of them reads as one space (`4111  1111  1111  1111`).
 */
const SPACE_ALT = '[ \\u00a0\\u2007\\u2009\\u202f]|&(?:nbsp|#0*(?:32|160|8199|8201|8239)|#x0*(?:20|a0|2007|2009|202f));';
/** Several characters read as one: a run of spaces, an `@` written as an entity; percent-encoded `' '`, `+`, `-` when asked. */
const AT_ENTITY = '&(?:#0*64|#x0*40|commat);';
const AT_ENTITY_WHOLE = new RegExp(`^${AT_ENTITY}$`);
const MANY_FOR_ONE = new RegExp(`(?:${SPACE_ALT})+|${AT_ENTITY}`, 'gi');
const MANY_FOR_ONE_PERCENT = new RegExp(`(?:${SPACE_ALT}|%20)+|${AT_ENTITY}|%2b|%2d`, 'gi');
/** Whether `text` may hold anything MANY_FOR_ONE changes (most text does not: it is not scanned). */
const MAY_CHANGE = /[\u00a0\u2007\u2009\u202f&%]| {2}/;

function manyForOne(m: string): string {
  const lower = m.toLowerCase();
  if (lower === '%2b') return '+';
  if (lower === '%2d') return '-';
  return AT_ENTITY_WHOLE.test(lower) ? '@' : ' ';
}

interface DetectorView {
  view: string;
  at: (i: number) => number;
}

/**
 * `text` as the detectors read it (ONE_FOR_ONE, then MANY_FOR_ONE), and where each of the
 * view's offsets (0 … view.length) falls in `text`. A character keeps its offset; several
 * read as one become one.
 */
function detectorView(text: string, encoded: Detector['encoded']): DetectorView {
  const mapped = text.replace(encoded === 'plus' ? ONE_FOR_ONE_PLUS : ONE_FOR_ONE, oneForOne);
  if (!MAY_CHANGE.test(mapped)) return { view: mapped, at: (i) => i };
  let view = '';
  let from = 0;
  // Pairs (view offset, text offset) at the end of each shortened stretch: offsets between two
  // such points differ by the same amount.
  const shifts: Array<[number, number]> = [];
  for (const m of mapped.matchAll(encoded === undefined ? MANY_FOR_ONE : MANY_FOR_ONE_PERCENT)) {
    if (m[0] === ' ') continue; // a single space reads as itself
    view += mapped.slice(from, m.index) + manyForOne(m[0]);
    from = m.index! + m[0].length;
    if (m[0].length > 1) shifts.push([view.length, from]);
  }
  view += mapped.slice(from);
  if (shifts.length === 0) return { view, at: (i) => i };
  return {
    view,
    at: (i) => {
      // The last shift at or before view offset i (binary search: a body may hold thousands).
      let lo = 0;
      let hi = shifts.length - 1;
      let found = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (shifts[mid]![0] <= i) {
          found = mid;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      return found < 0 ? i : shifts[found]![1] + (i - shifts[found]![0]);
    },
  };
}

/** Every validated candidate of every detector in `text`, overlapping ones included. */
export function findAll(text: string, detectors: readonly Detector[] = BUILTIN_DETECTORS): Finding[] {
  const found: Finding[] = [];
  // Detectors read the view; a finding's span and value are the text's, as written (a value is
  // remembered and scrubbed wherever that spelling appears again).
  // One view for each way of reading that some detector asks for, made when first asked.
  const views = new Map<Detector['encoded'], DetectorView>();
  for (const d of detectors) {
    let v = views.get(d.encoded);
    if (v === undefined) views.set(d.encoded, (v = detectorView(text, d.encoded)));
    const { view, at } = v;
    const push = (d: Detector, vStart: number, vEnd: number) => {
      const start = at(vStart);
      const end = at(vEnd);
      found.push({ detector: d.name, class: d.class, start, end, value: text.slice(start, end) });
    };
    if (d.find) {
      for (const c of d.find(view)) {
        if (c.end <= c.start || (d.validate && !d.validate(view.slice(c.start, c.end)))) continue;
        push(d, c.start, c.end);
      }
      continue;
    }
    for (const m of view.matchAll(globalOf(d.pattern))) {
      if (m[0].length === 0) continue;
      if (d.validate && !d.validate(m[0])) continue;
      push(d, m.index!, m.index! + m[0].length);
    }
  }
  return found.sort((a, b) => a.start - b.start || b.end - a.end);
}

/**
 * The findings in `text`, earliest first, without overlaps: of overlapping candidates the one
 * that starts first wins, the longer one on a tie.
 */
export function detect(text: string, detectors: readonly Detector[] = BUILTIN_DETECTORS): Finding[] {
  const kept: Finding[] = [];
  let until = -1;
  for (const f of findAll(text, detectors)) {
    if (f.start < until) continue;
    kept.push(f);
    until = f.end;
  }
  return kept;
}

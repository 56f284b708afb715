/**
 * The tokenizer of the policy language (decisions 5.1). It splits a whole policy source into
 * tokens with exact 1-based line and column (columns count Unicode code points), skipping
 * whitespace and comments. It knows just enough of CEL's lexical grammar (string literals in
 * all their forms, brackets) for the rule parser to find where one rule's expression ends and
 * the next rule begins; CEL itself parses the expressions.
 */

/** A point in the source: `offset` is a UTF-16 index, `line`/`column` are 1-based. */
export interface SourcePos {
  offset: number;
  line: number;
  column: number;
}

export type TokenKind = 'ident' | 'string' | 'number' | 'punct';

export interface Token extends SourcePos {
  kind: TokenKind;
  /** The exact source text of the token. */
  text: string;
  /** UTF-16 index just past the token. */
  end: number;
}

/** A problem found in the source, positioned like a compiler message. */
export interface Diagnostic extends SourcePos {
  message: string;
}

export interface TokenizeResult {
  tokens: Token[];
  /** Lexical errors (unterminated strings); tokenizing continues after each. */
  errors: Diagnostic[];
  /**
   * The source with every comment replaced by spaces (newlines kept), so a slice of it is
   * a CEL expression whose offsets equal the source offsets.
   */
  blanked: string;
}

/** Maps UTF-16 offsets to 1-based line and code-point column. */
export class LineMap {
  private readonly starts: number[] = [0];
  /**
   * The last position asked for: the tokenizer asks in order, so a column is counted on from
   * there rather than from the line's start (which made a long line cost its length squared:
   * 80 KB of `a ` held svcd's one thread for seconds).
   */
  private last: SourcePos = { offset: 0, line: 1, column: 1 };

  constructor(private readonly source: string) {
    for (let i = 0; i < source.length; i++) if (source.charCodeAt(i) === 10) this.starts.push(i + 1);
  }

  pos(offset: number): SourcePos {
    const off = Math.max(0, Math.min(offset, this.source.length));
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= off) lo = mid;
      else hi = mid - 1;
    }
    const lineStart = this.starts[lo]!;
    const resume = this.last.line === lo + 1 && this.last.offset <= off;
    let column = resume ? this.last.column : 1;
    for (let i = resume ? this.last.offset : lineStart; i < off; i++) {
      const c = this.source.charCodeAt(i);
      // A surrogate pair is one code point: count only its high half.
      if (!(c >= 0xdc00 && c <= 0xdfff && i > lineStart && isHighSurrogate(this.source.charCodeAt(i - 1)))) column++;
    }
    this.last = { offset: off, line: lo + 1, column };
    return this.last;
  }
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isIdentStart(c: string): boolean {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
}

function isIdentPart(c: string): boolean {
  return isIdentStart(c) || (c >= '0' && c <= '9');
}

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9';
}

/** Length of a string-literal prefix (`r`, `b`, `rb`, `br`, any case) at `i`, when a quote follows. */
function stringPrefixLength(src: string, i: number): number {
  const a = src[i]?.toLowerCase();
  const b = src[i + 1]?.toLowerCase();
  const q = (k: number) => src[i + k] === '"' || src[i + k] === "'";
  if ((a === 'r' || a === 'b') && q(1)) return 1;
  if (((a === 'r' && b === 'b') || (a === 'b' && b === 'r')) && q(2)) return 2;
  return 0;
}

/** Tokenizes a whole policy source. Never throws. */
export function tokenize(source: string): TokenizeResult {
  const map = new LineMap(source);
  const tokens: Token[] = [];
  const errors: Diagnostic[] = [];
  const blank = source.split('');
  const n = source.length;
  let i = 0;

  const push = (kind: TokenKind, start: number, end: number) => {
    tokens.push({ kind, text: source.slice(start, end), end, ...map.pos(start) });
  };
  const blankOut = (start: number, end: number) => {
    for (let k = start; k < end; k++) if (blank[k] !== '\n') blank[k] = ' ';
  };

  while (i < n) {
    const c = source[i]!;
    if (c === ' ' || c === '\t' || c === '\r' || c === '\n' || c === '\f' || c === '\v' || (c === '\uFEFF' && i === 0)) {
      i++;
      continue;
    }
    if (c === '#' || (c === '/' && source[i + 1] === '/')) {
      const start = i;
      while (i < n && source[i] !== '\n') i++;
      blankOut(start, i);
      continue;
    }
    const prefix = stringPrefixLength(source, i);
    if (c === '"' || c === "'" || prefix > 0) {
      const start = i;
      const raw = source.slice(i, i + prefix).toLowerCase().includes('r');
      i += prefix;
      const quote = source[i]!;
      const triple = source[i + 1] === quote && source[i + 2] === quote;
      i += triple ? 3 : 1;
      let closed = false;
      while (i < n) {
        const d = source[i]!;
        if (d === '\\' && !raw) {
          i += 2;
          continue;
        }
        if (triple) {
          if (d === quote && source[i + 1] === quote && source[i + 2] === quote) {
            i += 3;
            closed = true;
            break;
          }
        } else {
          if (d === '\n') break;
          if (d === quote) {
            i++;
            closed = true;
            break;
          }
        }
        i++;
      }
      if (i > n) i = n;
      if (!closed) errors.push({ ...map.pos(start), message: 'unterminated string literal' });
      push('string', start, i);
      continue;
    }
    if (isIdentStart(c)) {
      const start = i;
      while (i < n && isIdentPart(source[i]!)) i++;
      push('ident', start, i);
      continue;
    }
    if (isDigit(c)) {
      const start = i;
      while (i < n && (isIdentPart(source[i]!) || (source[i] === '.' && isDigit(source[i + 1] ?? '')))) {
        // exponent signs belong to the number: 1e-3
        if ((source[i] === 'e' || source[i] === 'E') && (source[i + 1] === '-' || source[i + 1] === '+')) i++;
        i++;
      }
      push('number', start, i);
      continue;
    }
    // Any other character is one punctuation token (one code point); CEL judges it.
    const width = isHighSurrogate(source.charCodeAt(i)) && i + 1 < n ? 2 : 1;
    push('punct', i, i + width);
    i += width;
  }
  return { tokens, errors, blanked: blank.join('') };
}

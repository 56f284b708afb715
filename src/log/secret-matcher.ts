/**
 * Every registered spelling of every secret found in one pass over a text: the spellings are
 * compiled, once per change, into an Aho-Corasick automaton (below), so a text costs the same
 * whatever their number (a secret is registered in some 20 to 200 spellings:
 * src/log/secret-spellings.ts). One regular expression of all of them was tried first: fast
 * with few spellings, but irregexp's look-ahead gives up as they grow (68 spellings, a third
 * of them in any case, took 3 times longer than the old loop of `includes`; bench in
 * docs/design.md, Secrets). A spelling may be matched in any letter case: the automaton reads
 * case-folded code units, and a spelling registered in its own case is compared with the
 * text where it is found.
 */
export class SecretMatcher {
  /** Each spelling, and whether it is matched in any letter case. */
  private readonly spellings = new Map<string, boolean>();
  private compiled: Automaton | null = null;
  private lowered: string[] | null = null;

  /** Registers `spelling`; `anyCase` also matches it with any of its letters in the other case. */
  add(spelling: string, anyCase: boolean): void {
    if (this.spellings.get(spelling) === true || (this.spellings.has(spelling) && !anyCase)) return;
    this.spellings.set(spelling, anyCase);
    this.compiled = null;
    this.lowered = null;
  }

  get size(): number {
    return this.spellings.size;
  }

  /**
   * The spellings lower-cased, where that changes them (checked in header names), worked out once
   * per change: lower-casing a PEM key's spellings for every header name of every answer took
   * about a millisecond a name with 50 secrets.
   */
  lowerCased(): string[] {
    this.lowered ??= [...new Set([...this.spellings.keys()].map((s) => s.toLowerCase()))].filter((lower) => !this.spellings.has(lower));
    return this.lowered;
  }

  /** True when `text` shows any spelling. */
  test(text: string): boolean {
    const automaton = this.automaton();
    return automaton !== null && automaton.scan(text, true).length > 0;
  }

  /**
   * Every `[start, end)` of `text` that spells a secret, overlapping ones included (a shorter
   * spelling that starts first must not hide the rest of a longer one), in no set order.
   */
  spans(text: string): Array<[number, number]> {
    return this.automaton()?.scan(text, false) ?? [];
  }

  private automaton(): Automaton | null {
    if (this.compiled === null && this.spellings.size > 0) this.compiled = new Automaton([...this.spellings]);
    return this.compiled;
  }
}

/**
 * How many code units of each spelling the automaton holds: the rest is compared where those
 * are found. A `${VAR}` may hold a PEM key of kilobytes, in some 60 spellings; whole, they
 * would make an automaton of hundreds of MB. 32 units tell spellings apart well enough that
 * the comparison is rare.
 */
const TRIE_DEPTH = 32;

/** Each UTF-16 code unit's case-folded code unit (lower-case of its upper-case, where both are one unit). */
let foldTable: Uint16Array | null = null;
function folds(): Uint16Array {
  if (foldTable !== null) return foldTable;
  foldTable = new Uint16Array(65536);
  for (let c = 0; c < 65536; c++) {
    const upper = String.fromCharCode(c).toUpperCase();
    const folded = upper.length === 1 ? upper.toLowerCase() : '';
    foldTable[c] = folded.length === 1 ? folded.charCodeAt(0) : c;
  }
  return foldTable;
}

/**
 * An Aho-Corasick automaton over the spellings' case-folded code units, as a dense table of
 * transitions: each code unit of a text costs two table reads, whatever the number of
 * spellings. Its states are the spellings' distinct prefixes (up to TRIE_DEPTH) and its
 * columns their distinct folded characters: 2,546 × 45, 0.5 MB, for four secrets.
 * A spelling to be matched in its own case is checked against the text where the folded scan
 * found it, which is rare: a text that spells it in another case.
 */
class Automaton {
  /** For each code unit, its column (0: a character no spelling has). */
  private readonly column = new Uint16Array(65536);
  private readonly width: number;
  /**
   * delta[row + column] is the next state's row (its number × width), as `-row - 1` when that
   * state ends a spelling: the common step, no spelling ends, reads nothing else.
   */
  private readonly delta: Int32Array;
  /** The spellings each state (by number) ends, own and by its failure links: ids[from[s] … from[s + 1]). */
  private readonly endsFrom: Int32Array;
  private readonly endsIds: Int32Array;
  private readonly spelt: string[];
  private readonly anyCase: boolean[];
  /** Where each spelling is compared first on a hit (`spells`). */
  private readonly probe: Int32Array;

  constructor(entries: Array<[string, boolean]>) {
    const fold = folds();
    this.spelt = entries.map(([s]) => s);
    this.anyCase = entries.map(([, a]) => a);
    this.probe = Int32Array.from(this.spelt, (s) => {
      // Its middle, past the NULs a wide spelling has in three units of four.
      let at = s.length >> 1;
      while (at < s.length - 1 && s.charCodeAt(at) === 0) at++;
      return at;
    });
    const columnOfFolded = new Map<number, number>();
    // Only the units the trie holds need a column: the rest are compared by `spells` (folded).
    for (const s of this.spelt) for (let i = 0; i < Math.min(s.length, TRIE_DEPTH); i++) {
      const f = fold[s.charCodeAt(i)]!;
      if (!columnOfFolded.has(f)) columnOfFolded.set(f, columnOfFolded.size + 1);
    }
    this.width = columnOfFolded.size + 1;
    for (let c = 0; c < 65536; c++) this.column[c] = columnOfFolded.get(fold[c]!) ?? 0;
    // The trie.
    const children: Array<Map<number, number>> = [new Map()];
    const ends: number[][] = [[]];
    this.spelt.forEach((s, id) => {
      let state = 0;
      for (let i = 0; i < Math.min(s.length, TRIE_DEPTH); i++) {
        const col = this.column[s.charCodeAt(i)]!;
        let next = children[state]!.get(col);
        if (next === undefined) {
          next = children.length;
          children.push(new Map());
          ends.push([]);
          children[state]!.set(col, next);
        }
        state = next;
      }
      ends[state]!.push(id);
    });
    // Failure links breadth first, each state's row completed from its failure's.
    const w = this.width;
    const delta = new Int32Array(children.length * w);
    const failure = new Int32Array(children.length);
    const order: number[] = [];
    for (const [col, child] of children[0]!) {
      delta[col] = child;
      order.push(child);
    }
    for (let at = 0; at < order.length; at++) {
      const s = order[at]!;
      const f = failure[s]!;
      for (let col = 0; col < w; col++) delta[s * w + col] = delta[f * w + col]!;
      for (const [col, child] of children[s]!) {
        failure[child] = delta[f * w + col]!;
        delta[s * w + col] = child;
        order.push(child);
      }
      ends[s]!.push(...ends[failure[s]!]!);
    }
    this.delta = delta.map((t) => (ends[t]!.length > 0 ? -(t * w) - 1 : t * w));
    this.endsFrom = new Int32Array(children.length + 1);
    for (let s = 0; s < children.length; s++) this.endsFrom[s + 1] = this.endsFrom[s]! + ends[s]!.length;
    this.endsIds = Int32Array.from(ends.flat());
  }

  /**
   * True when `text` spells spelling `id` from `start` (in any case if it may be). A text of
   * many copies of a public prefix that many long spellings share (every PKCS#8 key starts
   * `-----BEGIN PRIVATE KEY-----\nMIIE`, in some 20 spellings a key; its UTF-32 ones hold 8
   * characters in TRIE_DEPTH units) would have each compared over that prefix at every copy:
   * a character from its middle, which such a key holds in its random part, is compared first.
   * The scan has matched the first TRIE_DEPTH units folded, so a spelling in any case is
   * compared from there.
   */
  private spells(text: string, start: number, id: number): boolean {
    const spelling = this.spelt[id]!;
    if (start + spelling.length > text.length) return false;
    const fold = folds();
    const probe = this.probe[id]!;
    if (fold[text.charCodeAt(start + probe)] !== fold[spelling.charCodeAt(probe)]) return false;
    if (!this.anyCase[id]) return text.startsWith(spelling, start);
    for (let j = TRIE_DEPTH; j < spelling.length; j++) if (fold[text.charCodeAt(start + j)] !== fold[spelling.charCodeAt(j)]) return false;
    return true;
  }

  /** The spans spelt in `text` (only the first when `first`). */
  scan(text: string, first: boolean): Array<[number, number]> {
    const { column, delta, endsFrom, endsIds, width } = this;
    const out: Array<[number, number]> = [];
    let row = 0;
    for (let i = 0; i < text.length; i++) {
      row = delta[row + column[text.charCodeAt(i)]!]!;
      if (row >= 0) continue;
      row = -row - 1;
      const state = row / width;
      for (let k = endsFrom[state]!, to = endsFrom[state + 1]!; k < to; k++) {
        const id = endsIds[k]!;
        const spelling = this.spelt[id]!;
        const start = i + 1 - Math.min(spelling.length, TRIE_DEPTH);
        if (spelling.length > TRIE_DEPTH || !this.anyCase[id] ? !this.spells(text, start, id) : false) continue;
        out.push([start, start + spelling.length]);
        if (first) return out;
      }
    }
    return out;
  }
}

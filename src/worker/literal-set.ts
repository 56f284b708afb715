/**
 * A set of literals, each with a tag, found in text in one pass (Aho–Corasick) once there are
 * many: a large read noting thousands of customer names would otherwise scan every string once
 * per name, and a 5 MB result takes minutes (the step's heartbeats stall). Pure.
 */

/** Below this many literals, one native indexOf scan per literal is faster than the automaton. */
const AUTOMATON_FROM = 16;

interface Automaton {
  size: number;
  /** Per node: code unit → child node. Node 0 is the root. */
  next: Array<Map<number, number>>;
  fail: number[];
  /** Per node: index of the literal ending there, or -1. */
  out: number[];
  /** Per node: nearest node on its fail chain with a literal ending there, or 0. */
  dict: number[];
  literals: string[];
}

function build(literals: string[]): Automaton {
  const next: Array<Map<number, number>> = [new Map()];
  const out = [-1];
  literals.forEach((lit, index) => {
    let node = 0;
    for (let i = 0; i < lit.length; i++) {
      const ch = lit.charCodeAt(i);
      let child = next[node]!.get(ch);
      if (child === undefined) {
        child = next.length;
        next.push(new Map());
        out.push(-1);
        next[node]!.set(ch, child);
      }
      node = child;
    }
    out[node] = index;
  });
  const fail = new Array<number>(next.length).fill(0);
  const dict = new Array<number>(next.length).fill(0);
  const queue: number[] = [...next[0]!.values()];
  for (let q = 0; q < queue.length; q++) {
    const u = queue[q]!;
    for (const [ch, v] of next[u]!) {
      let f = fail[u]!;
      while (f !== 0 && !next[f]!.has(ch)) f = fail[f]!;
      const g = next[f]!.get(ch);
      fail[v] = g !== undefined && g !== v ? g : 0;
      dict[v] = out[fail[v]!]! >= 0 ? fail[v]! : dict[fail[v]!]!;
      queue.push(v);
    }
  }
  return { size: literals.length, next, fail, out, dict, literals };
}

export class LiteralSet<T> {
  private readonly tags = new Map<string, T>();
  private automaton: Automaton | null = null;

  get size(): number {
    return this.tags.size;
  }

  has(literal: string): boolean {
    return this.tags.has(literal);
  }

  /** Adds a literal (not the empty string); a literal already in the set keeps its first tag. */
  add(literal: string, tag: T): void {
    if (literal !== '' && !this.tags.has(literal)) this.tags.set(literal, tag);
  }

  /**
   * Every occurrence of every literal in `text` as [start, end, tag]: for each literal, its
   * leftmost occurrences that do not overlap one another (as repeated indexOf finds them).
   */
  findIn(text: string): Array<[number, number, T]> {
    const found: Array<[number, number, T]> = [];
    if (this.tags.size < AUTOMATON_FROM) {
      for (const [value, tag] of this.tags) {
        for (let at = text.indexOf(value); at >= 0; at = text.indexOf(value, at + value.length)) found.push([at, at + value.length, tag]);
      }
      return found;
    }
    if (this.automaton === null || this.automaton.size !== this.tags.size) this.automaton = build([...this.tags.keys()]);
    const { next, fail, out, dict, literals } = this.automaton;
    let lastEnd: Map<number, number> | null = null;
    let state = 0;
    for (let i = 0; i < text.length; i++) {
      const ch = text.charCodeAt(i);
      let to = next[state]!.get(ch);
      while (to === undefined && state !== 0) {
        state = fail[state]!;
        to = next[state]!.get(ch);
      }
      state = to ?? 0;
      for (let node = out[state]! >= 0 ? state : dict[state]!; node !== 0; node = dict[node]!) {
        const index = out[node]!;
        const literal = literals[index]!;
        const start = i + 1 - literal.length;
        lastEnd ??= new Map();
        if (start < (lastEnd.get(index) ?? 0)) continue;
        lastEnd.set(index, i + 1);
        found.push([start, i + 1, this.tags.get(literal)!]);
      }
    }
    return found;
  }
}

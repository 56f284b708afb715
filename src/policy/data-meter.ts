/**
 * The sizes of one decision's data that a condition's cost bound is worked out over
 * (src/policy/condition-cost.ts): measured lazily, each path at most once per decision.
 */

/**
 * Characters a string function walks in the time of one node evaluation: V8's string search,
 * case mapping and code-point counting take 1–4 ns a character, a node about 30 ns.
 */
export const CHARS_PER_STEP = 8;

/** Code points `size()` counts in a step: cel-js walks a string's code points (about 8 ns each). */
const CODE_POINTS_PER_STEP = 2;

/**
 * How what is at a path into the data (`action.args.items`) is sized for a factor of a cost
 * bound: `length`, the list's items or the map's entries there;
 * `nested`, every item and entry under it, nested ones too (a loop over parts of its elements
 * walks those); `member`, what `in` walks there (a list's items; a map is looked up, one step);
 * `compared`, what `in` compares there (everything nested under a list's items; 0 for a map);
 * `deep`, what an operation on the value there walks (`nested` and its characters at
 * `CHARS_PER_STEP` a step); `element`, the largest `deep` of one of its elements (or entries);
 * `chars`, what `size()` walks (a string's code points, `CODE_POINTS_PER_STEP` a step; a list
 * or map knows its size).
 */
export type PathSize = 'length' | 'nested' | 'member' | 'compared' | 'deep' | 'element' | 'chars';

/** What a condition reads, measured for one decision (`dataMeter`). */
export interface DataMeter {
  /** Every list item and map entry, nested ones included (L). */
  readonly items: number;
  /** Every character of every string and map key (T is L plus these). */
  readonly chars: number;
  /** The size of what is at a path (Factor), 0 where nothing is. */
  at(path: readonly string[], size: PathSize, within?: readonly string[]): number;
}

/** The sizes of one decision's data: `roots` by name (`action`, `run`), each part walked at most once. */
export function dataMeter(roots: Readonly<Record<string, unknown>>): DataMeter {
  // All of it is walked only for a condition that loops over a list it makes.
  let whole: { items: number; chars: number } | null = null;
  const all = () => (whole ??= sizeOf(Object.values(roots)));
  const cache = new Map<string, number>();
  return {
    get items() {
      return all().items;
    },
    get chars() {
      return all().chars;
    },
    at(path, size, within) {
      const key = JSON.stringify([size, path, within ?? null]);
      let n = cache.get(key);
      if (n === undefined) {
        n = sizeAt(stepInto(roots, path), size, within);
        cache.set(key, n);
      }
      return n;
    },
  };
}

function sizeAt(v: unknown, size: PathSize, within: readonly string[] = []): number {
  if (size === 'nested') return sizeOf([v]).items;
  if (size === 'compared') return Array.isArray(v) ? sizeOf([v]).items : 0;
  if (size === 'deep') {
    const { items, chars } = sizeOf([v]);
    return items + chars / CHARS_PER_STEP;
  }
  if (size === 'chars') return typeof v === 'string' ? v.length / CODE_POINTS_PER_STEP : 0;
  if (size === 'element') {
    // A loop over a map is at its keys.
    const elements: unknown[] = Array.isArray(v) ? v : v !== null && typeof v === 'object' ? Object.keys(v) : [];
    return elements.reduce<number>((most, e) => Math.max(most, sizeAt(stepInto(e, within), 'deep')), 0);
  }
  if (Array.isArray(v)) return v.length;
  // `key in map` is a lookup: one step, however large the map.
  return size === 'length' && v !== null && typeof v === 'object' ? Object.keys(v).length : 0;
}

/** What is at `path` under `v`, undefined where nothing is. */
function stepInto(v: unknown, path: readonly string[]): unknown {
  for (const step of path) v = v !== null && typeof v === 'object' && Object.hasOwn(v, step) ? (v as Record<string, unknown>)[step] : undefined;
  return v;
}

/** The list items, map entries and string characters of JSON-like values. */
export function sizeOf(values: readonly unknown[]): { items: number; chars: number } {
  let items = 0;
  let chars = 0;
  const stack: unknown[] = [...values];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') chars += v.length;
    else if (Array.isArray(v)) {
      items += v.length;
      for (const e of v) stack.push(e);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, e] of Object.entries(v)) {
        items++;
        chars += k.length;
        stack.push(e);
      }
    }
  }
  return { items, chars };
}

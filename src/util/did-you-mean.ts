/**
 * "Did you mean" for a misspelt name: the closest of the names a place allows, when it is
 * close enough to be the one meant (an edit distance of at most a third of its length, at
 * least 1; a swap of two neighbours is one edit). Used where a document's unknown key or
 * member is refused, so `statment` says `statement` instead of only "is not a known key".
 */

/** Optimal string alignment distance (Levenshtein plus adjacent swaps), case-sensitive. */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) rows.push([i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}

/** Names longer than this are not compared (a pasted blob is no misspelling). */
const MAX_NAME = 64;

/**
 * The allowed name `word` most likely misspells, or null when none is close: at most
 * `maxEdits` edits away (default a third of the word, at least 1), case aside.
 */
export function closestName(word: string, names: Iterable<string>, maxEdits = Math.max(1, Math.floor(word.length / 3))): string | null {
  if (word.length === 0 || word.length > MAX_NAME) return null;
  const lower = word.toLowerCase();
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const name of names) {
    if (name === word || name.length > MAX_NAME) continue;
    const d = editDistance(lower, name.toLowerCase());
    if (d <= maxEdits && d < bestDistance) {
      best = name;
      bestDistance = d;
    }
  }
  return best;
}

/** ` (did you mean "x"?)` for a misspelt name, else the empty string. */
export function didYouMean(word: string, names: Iterable<string>): string {
  const name = closestName(word, names);
  return name === null ? '' : ` (did you mean "${name}"?)`;
}

/**
 * For an ajv "unknown member" error (additionalProperties), the suggestion drawn from the
 * members its schema lists; needs ajv's `verbose` (parentSchema). Empty when none is close.
 */
export function didYouMeanMember(e: { parentSchema?: unknown }, member: string): string {
  const props = (e.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return props ? didYouMean(member, Object.keys(props)) : '';
}

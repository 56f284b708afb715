/**
 * `value` and everything reachable from it frozen in place, for the verified bundles and
 * remit payloads kept in caches and handed to every caller: one caller's edit cannot change
 * what the next one reads. Returns `value`.
 */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}

/**
 * JSON for svc's own clients to send to svcd. svcd refuses a body holding a lone surrogate
 * (`"\ud83d"` without its pair: not I-JSON, which canonical JSON needs; src/encoding/json-limits.ts),
 * and such strings do arrive from outside — a model's answer cut inside an emoji, a tool's
 * result. The worker and the gateway replace each lone surrogate with U+FFFD (what a UTF-8
 * decoder does with a broken sequence) rather than have a whole step or event refused for it.
 */
/** A surrogate code unit without its pair: in a `u` regexp it stands alone as category Cs. */
const LONE = /\p{Cs}/gu;
const HAS_LONE = /\p{Cs}/u;

/** True when `s` holds a lone surrogate (what I-JSON and canonical JSON cannot carry). */
export function hasLoneSurrogate(s: string): boolean {
  return HAS_LONE.test(s);
}

function wellFormed(s: string): string {
  return HAS_LONE.test(s) ? s.replace(LONE, '\uFFFD') : s;
}

function replacer(_key: string, value: unknown): unknown {
  if (typeof value === 'string') return wellFormed(value);
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value);
    if (keys.some((k) => HAS_LONE.test(k))) return Object.fromEntries(keys.map((k) => [wellFormed(k), (value as Record<string, unknown>)[k]]));
  }
  return value;
}

/** JSON.stringify with every lone surrogate, in values and member names, replaced by U+FFFD. */
export function wellFormedJson(value: unknown): string {
  return JSON.stringify(value, replacer);
}

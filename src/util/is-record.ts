/** A JSON object (not null, not an array): what a body, a payload or a stored record must be. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

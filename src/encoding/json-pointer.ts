/** JSON Pointer (RFC 6901), the form every `details.path` and redaction path takes. */

/** One reference token escaped: `~` → `~0`, `/` → `~1`. */
export function pointerToken(key: string | number): string {
  return String(key).replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The parts of an ajv error that say where it is (ajv's ErrorObject, structurally). */
interface AjvErrorPlace {
  instancePath: string;
  params: object;
  propertyName?: string;
}

/**
 * The JSON pointer to the member an ajv error is about. ajv reports a missing or unexpected
 * member at its parent object; every svc error names the member itself, so the pointer gets
 * the member's name appended and `member` says which it was (a name that failed
 * `propertyNames` is `member: 'name'`). Each caller words its own message.
 */
export function ajvErrorPath(e: AjvErrorPlace): { path: string; member?: 'missing' | 'extra' | 'name' } {
  const p = e.params as { missingProperty?: unknown; additionalProperty?: unknown; unevaluatedProperty?: unknown; propertyName?: unknown };
  if (p.missingProperty !== undefined) return { path: `${e.instancePath}/${pointerToken(String(p.missingProperty))}`, member: 'missing' };
  const extra = p.additionalProperty ?? p.unevaluatedProperty;
  if (extra !== undefined) return { path: `${e.instancePath}/${pointerToken(String(extra))}`, member: 'extra' };
  const name = e.propertyName ?? p.propertyName;
  if (name !== undefined) return { path: `${e.instancePath}/${pointerToken(String(name))}`, member: 'name' };
  return { path: e.instancePath };
}

/**
 * A `$ref` cycle that checks one value against itself without end: a loop of in-place
 * applicators (`allOf`, `anyOf`, `oneOf`, `not`, `if`, `then`, `else`, `dependentSchemas`,
 * schema-valued `dependencies`, `$ref`), none of which steps into a member or an item. Such a
 * schema compiles, and then overflows the stack on the values that reach the loop (a 500 on
 * every run, until the kernel caught it). A loop through `properties` or `items` ends with the
 * data and is fine. Only local references (`#`, `#/…`) are followed; a `$ref` to another
 * document is left to ajv.
 */

type Schema = Record<string, unknown>;

const isSchema = (v: unknown): v is Schema => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Keywords whose value is one subschema, a list of them, or a map of them. */
const ONE = ['additionalProperties', 'additionalItems', 'contains', 'propertyNames', 'not', 'if', 'then', 'else', 'unevaluatedItems', 'unevaluatedProperties'];
const LIST = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const MAP = ['properties', 'patternProperties', 'definitions', '$defs', 'dependentSchemas', 'dependencies'];

/** Applied to the same value (no step into the data). */
const IN_PLACE_ONE = ['not', 'if', 'then', 'else'];
const IN_PLACE_LIST = ['allOf', 'anyOf', 'oneOf'];
const IN_PLACE_MAP = ['dependentSchemas', 'dependencies'];

const token = (k: string) => k.replaceAll('~', '~0').replaceAll('/', '~1');

/** Every subschema position, by JSON pointer. */
function subschemas(root: unknown): Map<string, Schema> {
  const out = new Map<string, Schema>();
  const stack: Array<[unknown, string]> = [[root, '']];
  while (stack.length > 0) {
    const [node, at] = stack.pop()!;
    if (!isSchema(node) || out.has(at)) continue;
    out.set(at, node);
    for (const k of ONE) if (k in node) stack.push([node[k], `${at}/${token(k)}`]);
    if (Array.isArray(node.items)) node.items.forEach((s, i) => stack.push([s, `${at}/items/${i}`]));
    else if ('items' in node) stack.push([node.items, `${at}/items`]);
    for (const k of LIST) if (Array.isArray(node[k])) (node[k] as unknown[]).forEach((s, i) => stack.push([s, `${at}/${k}/${i}`]));
    for (const k of MAP) if (isSchema(node[k])) for (const [name, s] of Object.entries(node[k])) stack.push([s, `${at}/${token(k)}/${token(name)}`]);
  }
  return out;
}

/** The pointer a local `$ref` names, as the subschema map spells it; null for another document. */
function localTarget(ref: unknown): string | null {
  if (typeof ref !== 'string' || !ref.startsWith('#')) return null;
  const pointer = ref.slice(1);
  if (pointer !== '' && !pointer.startsWith('/')) return null; // an anchor name: left to ajv
  try {
    return pointer.split('/').map((t) => decodeURIComponent(t)).join('/'); // a fragment is percent-encoded
  } catch {
    return null;
  }
}

function inPlaceEdges(node: Schema, at: string): string[] {
  const out: string[] = [];
  for (const k of IN_PLACE_ONE) if (isSchema(node[k])) out.push(`${at}/${k}`);
  for (const k of IN_PLACE_LIST) if (Array.isArray(node[k])) (node[k] as unknown[]).forEach((_, i) => out.push(`${at}/${k}/${i}`));
  for (const k of IN_PLACE_MAP) if (isSchema(node[k])) for (const name of Object.keys(node[k])) out.push(`${at}/${k}/${token(name)}`);
  const ref = localTarget(node.$ref);
  if (ref !== null) out.push(ref);
  return out;
}

/** The pointer of a subschema on an in-place cycle, or null when there is none. */
export function inPlaceRefCycle(schema: unknown): string | null {
  const nodes = subschemas(schema);
  const state = new Map<string, 'open' | 'done'>();
  for (const start of nodes.keys()) {
    if (state.has(start)) continue;
    // Iterative DFS: schemas may nest deeper than the stack would like.
    const stack: Array<{ at: string; edges: string[]; next: number }> = [];
    const enter = (at: string) => {
      state.set(at, 'open');
      stack.push({ at, edges: inPlaceEdges(nodes.get(at)!, at).filter((e) => nodes.has(e)), next: 0 });
    };
    enter(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.next >= top.edges.length) {
        state.set(top.at, 'done');
        stack.pop();
        continue;
      }
      const to = top.edges[top.next++]!;
      const seen = state.get(to);
      if (seen === 'open') return to || '/';
      if (seen === undefined) enter(to);
    }
  }
  return null;
}

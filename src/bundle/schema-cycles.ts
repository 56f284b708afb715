/**
 * A `$ref` cycle that checks one value against itself without end: a loop of in-place
 * applicators (`allOf`, `anyOf`, `oneOf`, `not`, `if`, `then`, `else`, `dependentSchemas`,
 * schema-valued `dependencies`, `$ref`), none of which steps into a member or an item. Such a
 * schema compiles, and then overflows the stack on the values that reach the loop (a 500 on
 * every run, until the kernel caught it). A loop through `properties` or `items` ends with the
 * data and is fine. References are followed within the root document: `#`, `#/<pointer>`,
 * `#<anchor>` (`$anchor`), and the same after the root's own `$id`. A subschema with an `$id` of
 * its own is another document, where `#` means something else: it is not looked into (the
 * compiled schema's probes and the kernel's catch stand behind it).
 */

import { pointerToken } from '../encoding/json-pointer.js';

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

interface Document {
  /** Every subschema position of the root document, by JSON pointer. */
  nodes: Map<string, Schema>;
  /** `$anchor` names, to the pointer of the subschema that declares them. */
  anchors: Map<string, string>;
  /** The root's `$id` without its fragment, or null. */
  base: string | null;
}

function subschemas(root: unknown): Document {
  const out = new Map<string, Schema>();
  const anchors = new Map<string, string>();
  const base = isSchema(root) && typeof root.$id === 'string' ? root.$id.split('#')[0]! : null;
  const stack: Array<[unknown, string]> = [[root, '']];
  while (stack.length > 0) {
    const [node, at] = stack.pop()!;
    if (!isSchema(node) || out.has(at)) continue;
    if (at !== '' && typeof node.$id === 'string') continue; // another document
    out.set(at, node);
    if (typeof node.$anchor === 'string') anchors.set(node.$anchor, at);
    for (const k of ONE) if (k in node) stack.push([node[k], `${at}/${pointerToken(k)}`]);
    if (Array.isArray(node.items)) node.items.forEach((s, i) => stack.push([s, `${at}/items/${i}`]));
    else if ('items' in node) stack.push([node.items, `${at}/items`]);
    for (const k of LIST) if (Array.isArray(node[k])) (node[k] as unknown[]).forEach((s, i) => stack.push([s, `${at}/${k}/${i}`]));
    for (const k of MAP) if (isSchema(node[k])) for (const [name, s] of Object.entries(node[k])) stack.push([s, `${at}/${pointerToken(k)}/${pointerToken(name)}`]);
  }
  return { nodes: out, anchors, base };
}

/** The pointer a `$ref` names in the root document, as the subschema map spells it; null for another document. */
function localTarget(ref: unknown, doc: Document): string | null {
  if (typeof ref !== 'string') return null;
  const hash = ref.indexOf('#');
  const uri = hash < 0 ? ref : ref.slice(0, hash);
  if (uri !== '' && uri !== doc.base) return null;
  const fragment = hash < 0 ? '' : ref.slice(hash + 1);
  try {
    if (fragment !== '' && !fragment.startsWith('/')) return doc.anchors.get(decodeURIComponent(fragment)) ?? null;
    return fragment.split('/').map((t) => decodeURIComponent(t)).join('/'); // a fragment is percent-encoded
  } catch {
    return null;
  }
}

function inPlaceEdges(node: Schema, at: string, doc: Document): string[] {
  const out: string[] = [];
  for (const k of IN_PLACE_ONE) if (isSchema(node[k])) out.push(`${at}/${k}`);
  for (const k of IN_PLACE_LIST) if (Array.isArray(node[k])) (node[k] as unknown[]).forEach((_, i) => out.push(`${at}/${k}/${i}`));
  for (const k of IN_PLACE_MAP) if (isSchema(node[k])) for (const name of Object.keys(node[k])) out.push(`${at}/${k}/${pointerToken(name)}`);
  const ref = localTarget(node.$ref, doc);
  if (ref !== null) out.push(ref);
  return out;
}

/** The pointer of a subschema on an in-place cycle, or null when there is none. */
export function inPlaceRefCycle(schema: unknown): string | null {
  const doc = subschemas(schema);
  const nodes = doc.nodes;
  const state = new Map<string, 'open' | 'done'>();
  for (const start of nodes.keys()) {
    if (state.has(start)) continue;
    // Iterative DFS: schemas may nest deeper than the stack would like.
    const stack: Array<{ at: string; edges: string[]; next: number }> = [];
    const enter = (at: string) => {
      state.set(at, 'open');
      stack.push({ at, edges: inPlaceEdges(nodes.get(at)!, at, doc).filter((e) => nodes.has(e)), next: 0 });
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

/**
 * A `$ref` cycle that checks one value against itself without end: a loop of in-place
 * applicators (`allOf`, `anyOf`, `oneOf`, `not`, `if`, `then`, `else`, `dependentSchemas`,
 * schema-valued `dependencies`, `$ref`), none of which steps into a member or an item. Such a
 * schema compiles, and then overflows the stack on the values that reach the loop (a 500 on
 * every run, until the kernel caught it). A loop through `properties` or `items` ends with the
 * data and is fine. References are followed within the root document: `#`, `#/<pointer>`,
 * `#<anchor>` (`$anchor`, or draft-07's `"$id": "#anchor"`), and the same after the root's
 * own `$id` or a reference that resolves to it; a pointer is read as ajv reads it (each token
 * percent-decoded, then `~1` and `~0` unescaped). A subschema with an `$id` of its own (other
 * than a `#anchor`) is another document, where `#` means something else: it is not looked
 * into (the compiled schema's probes and the kernel's catch stand behind it).
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

/**
 * The root document's subschemas as a tree of ids: what each is, its parent and the pointer
 * segment that leads to it. Pointers are built only for the answer: built for every node, a
 * schema nested 20,000 deep made ≈1.6 GB of pointer text, and Map keys longer than V8 hashes
 * (16 K characters) collided, so the walk took ~20 s instead of milliseconds.
 */
interface Document {
  schemas: Schema[];
  parent: number[];
  /** The segment from the parent: `not`, `allOf/0`, `properties/<escaped name>` (escaped as a pointer). */
  segment: string[];
  /** Per node: its children by segment. */
  children: Array<Map<string, number>>;
  /** `$anchor` names, to the node that declares them. */
  anchors: Map<string, number>;
  /** The root's `$id` without its fragment, or null. */
  base: string | null;
}

function subschemas(root: Schema): Document {
  const doc: Document = { schemas: [], parent: [], segment: [], children: [], anchors: new Map(), base: typeof root.$id === 'string' ? root.$id.split('#')[0]! : null };
  const stack: Array<[unknown, number, string]> = [[root, -1, '']];
  while (stack.length > 0) {
    const [node, parent, segment] = stack.pop()!;
    if (!isSchema(node)) continue;
    // A subschema's `$id` starts another document, but for draft-07's plain-name fragment
    // (`"$id": "#a"`), which names an anchor in this one, as `$anchor` does.
    const plainName = typeof node.$id === 'string' && /^#[^/]/.test(node.$id);
    if (parent >= 0 && typeof node.$id === 'string' && !plainName) continue;
    const id = doc.schemas.length;
    doc.schemas.push(node);
    doc.parent.push(parent);
    doc.segment.push(segment);
    doc.children.push(new Map());
    if (parent >= 0) doc.children[parent]!.set(segment, id);
    if (typeof node.$anchor === 'string') doc.anchors.set(node.$anchor, id);
    if (plainName) doc.anchors.set((node.$id as string).slice(1), id);
    for (const k of ONE) if (k in node) stack.push([node[k], id, pointerToken(k)]);
    if (Array.isArray(node.items)) node.items.forEach((s, i) => stack.push([s, id, `items/${i}`]));
    else if ('items' in node) stack.push([node.items, id, 'items']);
    for (const k of LIST) if (Array.isArray(node[k])) (node[k] as unknown[]).forEach((s, i) => stack.push([s, id, `${k}/${i}`]));
    for (const k of MAP) if (isSchema(node[k])) for (const [name, s] of Object.entries(node[k])) stack.push([s, id, `${pointerToken(k)}/${pointerToken(name)}`]);
  }
  return doc;
}

/** The JSON pointer of a node, from the root. */
function pointerOf(id: number, doc: Document): string {
  const segments: string[] = [];
  for (let at = id; at > 0; at = doc.parent[at]!) segments.push(doc.segment[at]!);
  return segments.length === 0 ? '' : `/${segments.reverse().join('/')}`;
}

/**
 * Whether a `$ref`'s URI (before its `#`) names the root document: empty, the root's `$id`,
 * or a reference that resolves to it against that `$id` (`r.json` under `http://e/r.json`).
 */
function sameDocument(uri: string, base: string | null): boolean {
  if (uri === '' || uri === base) return true;
  if (base === null) return false;
  try {
    return new URL(uri, base).href === new URL(base).href;
  } catch {
    return false; // a base that is no absolute URL: only the exact spelling matches
  }
}

/** The node a `$ref` names in the root document; null for another document or no subschema. */
function localTarget(ref: unknown, doc: Document): number | null {
  if (typeof ref !== 'string') return null;
  const hash = ref.indexOf('#');
  const uri = hash < 0 ? ref : ref.slice(0, hash);
  if (!sameDocument(uri, doc.base)) return null;
  const fragment = hash < 0 ? '' : ref.slice(hash + 1);
  let tokens: string[];
  try {
    if (fragment !== '' && !fragment.startsWith('/')) return doc.anchors.get(decodeURIComponent(fragment)) ?? null;
    // As ajv reads it: split at "/", then each token percent-decoded and unescaped (~1, then
    // ~0), so a %2F is a "/" inside a name and a "~" before neither 0 nor 1 stays a "~". Each
    // token is then escaped again as the tree spells its segments.
    tokens = fragment
      .split('/')
      .slice(1)
      .map((t) => pointerToken(decodeURIComponent(t).replace(/~1/g, '/').replace(/~0/g, '~')));
  } catch {
    return null;
  }
  // Down the tree one segment at a time; a segment is one token (`not`) or two (`allOf/0`).
  let at = 0;
  for (let i = 0; i < tokens.length; ) {
    const kids = doc.children[at]!;
    const one = kids.get(tokens[i]!);
    const two = i + 1 < tokens.length ? kids.get(`${tokens[i]}/${tokens[i + 1]}`) : undefined;
    if (one !== undefined) [at, i] = [one, i + 1];
    else if (two !== undefined) [at, i] = [two, i + 2];
    else return null;
  }
  return at;
}

function inPlaceEdges(id: number, doc: Document): number[] {
  const node = doc.schemas[id]!;
  const kids = doc.children[id]!;
  const out: number[] = [];
  const add = (segment: string) => {
    const to = kids.get(segment);
    if (to !== undefined) out.push(to);
  };
  for (const k of IN_PLACE_ONE) add(k);
  for (const k of IN_PLACE_LIST) if (Array.isArray(node[k])) (node[k] as unknown[]).forEach((_, i) => add(`${k}/${i}`));
  for (const k of IN_PLACE_MAP) if (isSchema(node[k])) for (const name of Object.keys(node[k])) add(`${k}/${pointerToken(name)}`);
  const ref = localTarget(node.$ref, doc);
  if (ref !== null) out.push(ref);
  return out;
}

const OPEN = 1;
const DONE = 2;

/** The pointer of a subschema on an in-place cycle, or null when there is none. */
export function inPlaceRefCycle(schema: unknown): string | null {
  if (!isSchema(schema)) return null;
  const doc = subschemas(schema);
  const state = new Uint8Array(doc.schemas.length);
  for (let start = 0; start < doc.schemas.length; start++) {
    if (state[start] !== 0) continue;
    // Iterative DFS: schemas may nest deeper than the stack would like.
    const stack: Array<{ id: number; edges: number[]; next: number }> = [];
    const enter = (id: number) => {
      state[id] = OPEN;
      stack.push({ id, edges: inPlaceEdges(id, doc), next: 0 });
    };
    enter(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.next >= top.edges.length) {
        state[top.id] = DONE;
        stack.pop();
        continue;
      }
      const to = top.edges[top.next++]!;
      if (state[to] === OPEN) return pointerOf(to, doc) || '/';
      if (state[to] === 0) enter(to);
    }
  }
  return null;
}

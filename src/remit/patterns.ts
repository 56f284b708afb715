/**
 * Tool and scope patterns (interface 2.1) and pattern coverage for derive (decisions §3).
 *
 * - A tool id is `<connector>.<operation>`; a tool pattern is an exact id or `<connector>.*`.
 * - A scope is `<system>:<kind>:<key>`; a scope pattern may end in `*` to match a prefix.
 * - Matching is exact-or-glob and case sensitive; there are no regular expressions.
 *
 * Coverage is defined so that it is sound: `covers(parent, child)` holds only when every id
 * or scope the child pattern matches is also matched by the parent pattern. That is what
 * makes "a derived remit never permits more than its parent" a property, not a hope.
 */

/** True when tool `pattern` permits tool `id` (an exact id, or `<connector>.*`). */
export function toolMatches(pattern: string, id: string): boolean {
  if (pattern.endsWith('.*')) {
    const prefix = pattern.slice(0, -1); // keeps the dot: "billing."
    return id.length > prefix.length && id.startsWith(prefix);
  }
  return pattern === id;
}

/** True when scope `pattern` permits `scope` (exact, or a prefix when the pattern ends in `*`). */
export function scopeMatches(pattern: string, scope: string): boolean {
  if (pattern.endsWith('*')) return scope.startsWith(pattern.slice(0, -1));
  return pattern === scope;
}

/** True when some pattern in `patterns` permits tool `id`. */
export function anyToolMatches(patterns: readonly string[], id: string): boolean {
  for (const p of patterns) if (toolMatches(p, id)) return true;
  return false;
}

/** True when some pattern in `patterns` permits `scope`. */
export function anyScopeMatches(patterns: readonly string[], scope: string): boolean {
  for (const p of patterns) if (scopeMatches(p, scope)) return true;
  return false;
}

/**
 * Decisions §3: an exact tool id covers itself; `c.*` covers `c.*` and every `c.<op>`.
 * (A child `c.*` is covered only by a parent glob whose prefix starts it, e.g. `c.*`.)
 */
export function toolCovers(parent: string, child: string): boolean {
  if (child.endsWith('.*')) {
    if (!parent.endsWith('.*')) return false;
    return child.slice(0, -1).startsWith(parent.slice(0, -1));
  }
  return toolMatches(parent, child);
}

/**
 * Decisions §3: a scope pattern ending in `*` covers every scope and pattern that starts with
 * its prefix; an exact scope covers itself.
 *
 * One shape reads two ways: `<name>:*` is a prefix pattern and also the literal that grants a
 * connector with no scope derivation, an MCP server's whole `mcp:<name>:*` (interface 5.3
 * step 6), which the gateway honours only when given exactly. So such a child is covered by
 * its own literal, or by a parent that covers the MCP server's scope as well: `ev*` does not
 * grant the server `everything`, and must not let a child name `everything:*`.
 */
export function scopeCovers(parent: string, child: string): boolean {
  if (child.endsWith('*')) {
    if (!parent.endsWith('*')) return false;
    if (!child.slice(0, -1).startsWith(parent.slice(0, -1))) return false;
    const literal = CONNECTOR_LITERAL.exec(child);
    return literal === null || parent === child || scopeCovers(parent, `mcp:${literal[1]}:*`);
  }
  return scopeMatches(parent, child);
}

/** `<name>:*`: the scope literal of a connector with no derivation. */
const CONNECTOR_LITERAL = /^([^:*]+):\*$/;

/** The first child tool pattern no parent pattern covers, or null when all are covered. */
export function uncoveredTool(parents: readonly string[], children: readonly string[]): string | null {
  for (const c of children) if (!parents.some((p) => toolCovers(p, c))) return c;
  return null;
}

/** The first child scope pattern no parent pattern covers, or null when all are covered. */
export function uncoveredScope(parents: readonly string[], children: readonly string[]): string | null {
  for (const c of children) if (!parents.some((p) => scopeCovers(p, c))) return c;
  return null;
}

const TOOL_PATTERN = /^[^\s.*]+\.(\*|[^\s*]+)$/;
const SCOPE_PATTERN = /^[^\s*]*\*?$/;
/** An exact scope: `<system>:<kind>:<key>`, none empty (the key may hold more colons, as a host's port or an IPv6 address does). */
const EXACT_SCOPE = /^[^:]+:[^:]+:.+$/;

/**
 * Why a tool pattern is not well formed, or null when it is: `<connector>.<operation>` or
 * `<connector>.*`; no whitespace, `*` only as the whole last segment.
 */
export function toolPatternProblem(pattern: string): string | null {
  if (pattern.length === 0) return 'is empty';
  if (pattern.length > 256) return 'is longer than 256 characters';
  if (!TOOL_PATTERN.test(pattern)) return 'must be <connector>.<operation> or <connector>.*';
  return null;
}

/**
 * Why a scope pattern is not well formed, or null (interface 2.1): an exact scope is
 * `<system>:<kind>:<key>`; a pattern ending in `*` matches a prefix, so any prefix will do
 * (`*`, `sql:*`, `sql:table:inv*`); no whitespace, `*` only at the end.
 */
export function scopePatternProblem(pattern: string): string | null {
  if (pattern.length === 0) return 'is empty';
  if (pattern.length > 512) return 'is longer than 512 characters';
  if (!SCOPE_PATTERN.test(pattern)) return 'may contain "*" only as its last character and no whitespace';
  if (!pattern.endsWith('*') && !EXACT_SCOPE.test(pattern)) return 'must be <system>:<kind>:<key>, or a prefix ending in "*"';
  return null;
}

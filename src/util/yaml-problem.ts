/**
 * A YAML parser error in one line: the `yaml` package ends its message with a code frame (the
 * line, then a caret under the column) after "at line L, column C:", and svcd prints each
 * problem on a line of its own (svcd(8) EXIT STATUS).
 */
export function yamlProblem(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return (message.split('\n')[0] ?? message).replace(/:\s*$/, '');
}

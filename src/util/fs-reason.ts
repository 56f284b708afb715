/**
 * A file-system error in words: "no such file" rather than ENOENT. `words` adds or overrides
 * readings for one use (making a directory reads ENOENT otherwise). Unknown codes are given
 * as the code, else the message.
 */
export function fsReason(err: unknown, words: Readonly<Record<string, string>> = {}): string {
  const e = err as NodeJS.ErrnoException;
  const code = e?.code;
  return (code !== undefined ? (words[code] ?? FS_WORDS[code]) : undefined) ?? code ?? e?.message ?? String(err);
}

const FS_WORDS: Readonly<Record<string, string>> = { ENOENT: 'no such file', EISDIR: 'is a directory', EACCES: 'permission denied', ENOTDIR: 'a parent is not a directory' };

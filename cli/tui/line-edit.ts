/**
 * One-line text editing as a pure function of (value, key): printable keys append,
 * Backspace/Delete remove the last character, Ctrl+U clears, Enter submits (also at the end
 * of a chunk of typed text), Esc cancels.
 * The inbox calls it from its single input handler, so no key depends on which component
 * happens to be mounted when it arrives.
 */
import type { Key } from 'ink';

/** `submit` carries the line as submitted (text that arrived in the same chunk as the Enter included). */
export type LineEdit = { kind: 'edit'; value: string } | { kind: 'submit'; value: string } | { kind: 'cancel' } | { kind: 'ignore' };

/** What a key does to a line of at most `maxLength` characters. (Default maxLength: 500) */
export function editLine(value: string, input: string, key: Key, maxLength = 500): LineEdit {
  if (key.return) return { kind: 'submit', value };
  if (key.escape) return { kind: 'cancel' };
  if (key.backspace || key.delete) return { kind: 'edit', value: [...value].slice(0, -1).join('') };
  if (key.ctrl && input === 'u') return { kind: 'edit', value: '' };
  if (key.ctrl || key.meta || key.upArrow || key.downArrow || key.leftArrow || key.rightArrow || key.tab || key.pageUp || key.pageDown) {
    return { kind: 'ignore' };
  }
  // Text and the Enter after it can arrive as one chunk ("duplicate charge\r": typed fast,
  // sent by a script, tmux send-keys … Enter): the Enter still submits. Inside a chunk (a
  // multi-line paste) newlines become spaces; control characters are dropped.
  const submits = /[\r\n]$/.test(input);
  // eslint-disable-next-line no-control-regex
  const text = input.replace(/[\r\n]+$/, '').replace(/[\r\n\t]+/g, ' ').replace(/[\u0000-\u001f\u007f-\u009f]/g, '');
  const next = [...(value + text)].slice(0, maxLength).join('');
  if (submits) return { kind: 'submit', value: next };
  if (!text) return { kind: 'ignore' };
  return { kind: 'edit', value: next };
}

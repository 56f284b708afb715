/**
 * The one render helper every TUI test uses (style: gemini-cli test-utils/render.tsx): wraps
 * ink-testing-library's render, strips colour codes from frames, types keys through stdin
 * (waiting a turn after each so Ink re-renders and re-binds its input handlers), and waits
 * for a frame to show something.
 */
import type { ReactElement } from 'react';
import { cleanup, render as inkRender } from 'ink-testing-library';
import { afterEach } from 'vitest';

// Every test file that renders gets its apps unmounted after each test.
afterEach(() => cleanup());

/** Key sequences as a terminal sends them. */
export const KEY = {
  up: '\u001B[A',
  down: '\u001B[B',
  enter: '\r',
  escape: '\u001B',
  backspace: '\u007F',
} as const;

// eslint-disable-next-line no-control-regex
const ANSI = /\u001B\[[0-9;?]*[A-Za-z]|\u001B\][^\u0007]*\u0007/g;

/**
 * Lets Ink's input flush and React's commit run. A lone ESC is held by Ink until a
 * setImmediate flush; waiting for our own setImmediate first guarantees that flush has run
 * before the next key is written (else ESC + key would read as Alt+key).
 */
const turn = async () => {
  await new Promise<void>((r) => setImmediate(r));
  await new Promise<void>((r) => setTimeout(r, 15));
};

export interface TuiHandle {
  /** The last frame, colour codes removed. */
  frame(): string;
  /** The last frame as written, escape codes included. */
  raw(): string;
  /** Writes each key to stdin, one turn apart. */
  press(...keys: string[]): Promise<void>;
  /** Types text one character at a time. */
  type(text: string): Promise<void>;
  /** Waits until the frame contains `text` (or satisfies `test`); throws with the frame on timeout. */
  waitFor(test: string | RegExp | ((frame: string) => boolean), timeoutMs?: number): Promise<string>;
  rerender(tree: ReactElement): void;
  unmount(): void;
  stdin: { write(data: string): void };
}

export function renderTui(tree: ReactElement): TuiHandle {
  const inst = inkRender(tree);
  const frame = () => (inst.lastFrame() ?? '').replace(ANSI, '');
  const matches = (t: string | RegExp | ((f: string) => boolean), f: string) =>
    typeof t === 'string' ? f.includes(t) : t instanceof RegExp ? t.test(f) : t(f);
  return {
    frame,
    raw: () => inst.lastFrame() ?? '',
    async press(...keys) {
      await turn();
      for (const k of keys) {
        inst.stdin.write(k);
        await turn();
      }
    },
    async type(text) {
      await turn();
      for (const ch of text) {
        inst.stdin.write(ch);
        await turn();
      }
    },
    async waitFor(test, timeoutMs = 3000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const f = frame();
        if (matches(test, f)) return f;
        if (Date.now() > until) throw new Error(`timed out waiting for ${String(test)}; last frame:\n${f}`);
        await turn();
      }
    },
    rerender: inst.rerender,
    unmount: inst.unmount,
    stdin: inst.stdin,
  };
}

/**
 * The inbox honours NO_COLOR (no-color.org; svc-approvals(1) ENVIRONMENT): set and not empty,
 * no colour reaches the terminal; bold, inverse and dim stay. Checked on a real terminal (a
 * tmux pane, its cells read back with their attributes), on the screen svc approvals shows
 * when svcd cannot be reached: bold red without NO_COLOR.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, tempDir } from '../helpers/daemon.js';

const SOCKET = join(tempDir('svc-nocolor-sock-'), 'tmux.sock');
const tmux = (...args: string[]) => execFileSync('tmux', ['-S', SOCKET, ...args], { encoding: 'utf8' });

/** The pane of `svc approvals` against an address nothing listens on, with its escapes. */
async function screen(noColor: string | undefined): Promise<string> {
  const session = `nc${noColor ?? 'unset'}`.replace(/[^a-z0-9]/gi, '');
  const env = noColor === undefined ? 'env -u NO_COLOR' : `env NO_COLOR=${noColor}`;
  const cli = join(ROOT, 'dist/cli/index.js');
  tmux('new-session', '-d', '-s', session, '-x', '80', '-y', '24', `${env} TERM=xterm-256color node ${cli} approvals --actor fin-1:finance --kernel-url http://127.0.0.1:2; sleep 30`);
  try {
    for (const end = Date.now() + 15_000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
      const text = tmux('capture-pane', '-e', '-p', '-t', session);
      if (text.includes('Retrying every')) return text;
    }
    throw new Error(`the pane never showed the unreachable screen:\n${tmux('capture-pane', '-p', '-t', session)}`);
  } finally {
    tmux('kill-session', '-t', session);
  }
}

// SGR parameters that set a foreground or background colour: 30–37, 39 is the reset, 40–47,
// 90–97, 100–107, and 38;… / 48;… for 256 and true colours.
const COLOUR = /\x1b\[(?:[0-9;]*;)?(?:3[0-7]|4[0-7]|9[0-7]|10[0-7]|38|48)(?:;[0-9;]*)?m/;

describe('svc approvals and NO_COLOR (no-color.org)', () => {
  afterAll(() => {
    spawnSync('tmux', ['-S', SOCKET, 'kill-server']);
  });

  it('draws colour without NO_COLOR, and none with it, keeping bold', async () => {
    if (spawnSync('which', ['tmux']).status !== 0) throw new Error('tmux is required for this test: apt-get install -y tmux');
    if (!existsSync(join(ROOT, 'dist/cli/index.js'))) throw new Error('dist/cli/index.js is missing: build first (npm run build)');
    const coloured = await screen(undefined);
    expect(coloured).toMatch(/\x1b\[31m/); // "Cannot reach svcd" in red
    for (const value of ['1', 'true']) {
      const plain = await screen(value);
      expect(plain, `NO_COLOR=${value}`).toContain('Cannot reach svcd at http://127.0.0.1:2');
      expect(plain, `NO_COLOR=${value}`).not.toMatch(COLOUR);
      expect(plain, `NO_COLOR=${value}`).toMatch(/\x1b\[1m/);
    }
    // Set but empty is not set (no-color.org).
    expect(await screen('')).toMatch(/\x1b\[31m/);
  });
});

#!/usr/bin/env node
// The test suite drives the approvals inbox under a real tmux (issue 5). On a fresh machine
// `npm test` installs it through Debian's packages when it can (root with apt-get), and
// otherwise says exactly what is missing instead of failing later inside a test.
import { execFileSync, spawnSync } from 'node:child_process';

function has(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

if (!has('tmux')) {
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  if (root && has('apt-get')) {
    process.stderr.write('tmux not found: installing it with apt-get (needed by test/tui/tmux.test.ts)\n');
    execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null'], { stdio: 'inherit' });
  } else {
    process.stderr.write('tmux is required by the test suite (test/tui/tmux.test.ts): install it, e.g. `sudo apt-get install tmux`\n');
    process.exit(1);
  }
}

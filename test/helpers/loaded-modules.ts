/**
 * What a built svc or svcd loads: the child runs with a loader hook (test/helpers/load-log.mjs)
 * that writes each module's URL to a file, read back here as paths below the package root.
 * Structural checks of start-up (which command loads which library), never a clock.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ROOT, tempDir } from './daemon.js';

/** `node --import load-log.mjs`: the argv prefix, and the environment naming the log file. */
export function loadLogged(log: string): { execArgs: string[]; env: Record<string, string> } {
  return { execArgs: ['--import', join(ROOT, 'test/helpers/load-log.mjs')], env: { SVC_TEST_LOAD_LOG: log } };
}

/** The modules listed in a load log, as paths below the package root. */
export function modulesIn(log: string): string[] {
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((u) => u.startsWith('file://'))
    .map((u) => decodeURIComponent(new URL(u).pathname).slice(ROOT.length + 1));
}

/**
 * Starts the built svcd with `args` (kernel and gateway on port 0, a fresh data directory, a
 * temp working directory) until its ready line, stops it, and returns what it loaded by then.
 */
export async function svcdServingModules(args: string[]): Promise<string[]> {
  const dir = tempDir('svcd-modules-');
  const log = join(dir, 'loaded.txt');
  const { execArgs, env } = loadLogged(log);
  const child = spawn(process.execPath, [...execArgs, join(ROOT, 'dist/daemon/main.js'), '--data-dir', join(dir, 'data'), '--kernel-listen', '127.0.0.1:0', '--gateway-listen', '127.0.0.1:0', ...args], {
    cwd: dir, // a gateway without a data_dir keeps ./gateway-data
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const ready = await new Promise<boolean>((resolve) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(true); // the JSON line with the addresses
    });
    child.on('exit', () => resolve(false));
  });
  expect(ready, err || out).toBe(true);
  child.kill('SIGTERM');
  await new Promise((r) => child.on('exit', r));
  return modulesIn(log);
}

/**
 * Module hooks for a child process (`node --import …/load-log.mjs`): every module loaded
 * through the ES module loader, an npm package's entry included, is appended to the file named
 * in `initialize`'s data, one URL a line, before it loads (synchronously: the list is whole
 * however the process exits). test/cli/startup-modules.test.ts reads it.
 */
import { appendFileSync } from 'node:fs';

let file;

export function initialize(data) {
  file = data.file;
}

export async function load(url, context, nextLoad) {
  appendFileSync(file, `${url}\n`);
  return nextLoad(url, context);
}

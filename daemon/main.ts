#!/usr/bin/env node
/**
 * svcd's entry. Loading svcd takes most of a second, and a SIGTERM in that time would kill
 * the process with 143 before any handler of its own is installed; decisions §11 says SIGTERM
 * drains and exits 0. So the signals are held from the first line: daemon/svcd.ts claims them
 * once its own handlers are in place, and a signal that came meanwhile stops svcd as soon as
 * it has started (or at once, for a command that has done nothing yet).
 */
let held: string | null = null;
// A second signal before svcd has done anything is "stop now": nothing is open yet.
const hold = (signal: NodeJS.Signals) => {
  if (held !== null) process.exit(0);
  held = signal;
};
process.on('SIGTERM', hold);
process.on('SIGINT', hold);
process.on('SIGHUP', hold);
// `ps` shows svcd and its flags rather than node and a path into dist/; and from here on a
// signal is held (what the signal tests wait for).
process.title = ['svcd', ...process.argv.slice(2)].join(' ');

const { main } = await import('./svcd.js');
await main(() => {
  process.off('SIGTERM', hold);
  process.off('SIGINT', hold);
  process.off('SIGHUP', hold);
  return held;
});

/**
 * Regular expressions that backtrack (a policy's `matches`, a schema's `pattern`) can take
 * exponential time on input a worker controls, and one such match holds the event loop, the
 * whole kernel, for minutes. CEL defines `matches` as RE2, which is linear; cel-js uses the
 * JS RegExp. V8 can move a regexp that backtracks too much onto its linear-time engine, and
 * this module turns that on for the process (measured: `^([a-z]+)+$` on 28 letters and a
 * `!`, 16 s → 1 ms). Patterns that engine cannot run (backreferences, lookaround, which RE2
 * does not have either) keep backtracking: policies come from operators, not workers.
 *
 * Imported for its effect, before the first regexp it protects is compiled.
 */
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');

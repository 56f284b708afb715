/**
 * Regular expressions that backtrack (a policy's `matches`, a schema's `pattern`) can take
 * exponential time on input a worker controls, and one such match holds the event loop, the
 * whole kernel, for minutes. CEL defines `matches` as RE2, which is linear; cel-js uses the
 * JS RegExp. V8 can move a regexp that backtracks too much onto its linear-time engine, and
 * this module turns that on for the process (measured: `^([a-z]+)+$` on 28 letters and a
 * `!`, 16 s → 1 ms). Patterns that engine cannot run keep backtracking: backreferences and
 * lookaround (RE2 has neither), but also RE2-valid counted repetition such as `(.*a){17}$` or
 * `^([a-z]+ ?){1,30}$` (28 letters and a `!`: 6 s). A policy's `matches` therefore runs on
 * re2js instead (src/policy/re2-matches.ts); this guard stays for the process's other regexps.
 *
 * Imported for its effect, before the first regexp it protects is compiled.
 */
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');

/**
 * A command's action that loads the module doing the work when the command runs, not when the
 * program is built (docs/design.md, "CLI start-up"): `svc --version` and `svc run list` need
 * neither the YAML parser, the JSON Schema validator nor the policy compiler.
 */
import type { Command } from 'commander';

export function lazyAction<M, A extends unknown[]>(load: () => Promise<M>, pick: (m: M) => (this: Command, ...args: A) => void | Promise<void>): (this: Command, ...args: A) => Promise<void> {
  return async function (this: Command, ...args: A): Promise<void> {
    await pick(await load()).apply(this, args);
  };
}

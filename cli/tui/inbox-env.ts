/**
 * The process environment the inbox needs, set before React and Ink are first imported (both
 * read it then). Called by `svc approvals` just before it loads the inbox.
 */
export function inboxEnv(env: NodeJS.ProcessEnv = process.env): void {
  // Ink decides at import time whether it runs "in CI" (CI or CONTINUOUS_INTEGRATION set)
  // and then draws only the last frame on exit. The inbox runs only on a terminal, where
  // a person is looking at it, so it always wants live frames.
  delete env.CI;
  delete env.CONTINUOUS_INTEGRATION;
  // React's development build (what an unset NODE_ENV loads) records every render of a
  // component whose props changed as a performance.measure entry, with the props' diff, and
  // Node keeps every entry: an inbox of 1000 approvals grew by 2 MB a second, idle (the scale
  // sweep of 2026-11-29: 400 MB, and the collector's work growing with it). The inbox is not
  // a React development session, whatever NODE_ENV the shell has.
  env.NODE_ENV = 'production';
}

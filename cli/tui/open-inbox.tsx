/**
 * Opens the approvals inbox on the real terminal and resolves when the user quits.
 */
import { render } from 'ink';
import { ApprovalsApi, type Actor } from './approvals-api.js';
import { InboxSource } from './inbox-source.js';
import { InboxApp } from './InboxApp.js';

export interface OpenInboxOptions {
  kernelUrl: string;
  token?: string;
  actor: Actor;
  /** Poll period in ms. (Default: 2000) */
  intervalMs?: number;
}

/** Renders the inbox full-screen until `q` (or Ctrl+C). */
export async function openInbox(opts: OpenInboxOptions): Promise<void> {
  const api = new ApprovalsApi({ baseUrl: opts.kernelUrl, token: opts.token });
  const source = new InboxSource({ api, actor: opts.actor, intervalMs: opts.intervalMs });
  // The alternate screen keeps the user's scrollback clean, like less or top.
  const alt = process.stdout.isTTY;
  if (alt) process.stdout.write('\u001B[?1049h\u001B[H');
  // Made narrower, the terminal re-wraps the frame on screen into more rows than Ink erases
  // before it redraws (as many as it wrote), and Ink's own redraw on the resize still has the
  // old widths (the app learns the new size a render later): a stale copy stayed above the
  // new screen. On the alternate screen all of it is ours, so it is cleared after Ink's
  // redraw (this listener comes after Ink's) and before the app's, which draws from the top.
  let columns = process.stdout.columns;
  const onResize = () => {
    if (alt && process.stdout.columns < columns) process.stdout.write('\u001B[2J\u001B[H');
    columns = process.stdout.columns;
  };
  try {
    const app = render(<InboxApp source={source} />, { exitOnCtrlC: true, patchConsole: true });
    process.stdout.on('resize', onResize);
    await app.waitUntilExit();
  } finally {
    process.stdout.off('resize', onResize);
    source.stop();
    if (alt) process.stdout.write('\u001B[?1049l');
  }
}

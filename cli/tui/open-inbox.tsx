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
  try {
    const app = render(<InboxApp source={source} />, { exitOnCtrlC: true, patchConsole: true });
    await app.waitUntilExit();
  } finally {
    source.stop();
    if (alt) process.stdout.write('\u001B[?1049l');
  }
}

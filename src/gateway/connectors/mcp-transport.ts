/**
 * The stdio transport the MCP connector hands to the SDK's `Client` (decisions §9). It speaks
 * the SDK's own stdio framing (`deserializeMessage`, `serializeMessage`) and environment defaults
 * (`getDefaultEnvironment`); it differs from the SDK's `StdioClientTransport` in one way that
 * the gateway needs: the server is spawned as the leader of its own process group, so that
 * stopping it ends every process it started (an `npx` wrapper and the server under it, a
 * server's own workers), not just the first. stderr is always drained, line by line, to a
 * callback (the connector logs it through the redactor).
 *
 * Both streams are split into lines by `LineSplitter`, which never holds more than one line of
 * a bound: a server is a hostile peer too. A stdout line that is not a JSON-RPC message is
 * reported and skipped (the messages after it in the same chunk still arrive); a stdout line
 * longer than `maxMessageBytes` is dropped as it streams in (its request times out) instead
 * of being buffered without end; a stderr line longer than `maxStderrLineBytes` is
 * dropped with a note (cut, it could end inside a secret that redaction would not recognise).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { deserializeMessage, serializeMessage, STDIO_DEFAULT_MAX_BUFFER_SIZE } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { GROUP_MARK_VARIABLE, killGroup, trackGroup, untrackGroup, useGroups } from './mcp-process-groups.js';

// Kept where callers found them before the group bookkeeping moved out (mcp-process-groups.ts).
export { GROUP_MARK_VARIABLE, isOwnGroup, killGroup } from './mcp-process-groups.js';

export interface GroupStdioOptions {
  command: string;
  args: string[];
  /** Added to the SDK's default inherited environment (PATH, HOME, …). */
  env: Record<string, string>;
  cwd?: string | null;
  /** Each stderr line of the server. */
  onStderr?: (line: string) => void;
  /** Grace period after closing stdin before SIGTERM, then SIGKILL. (Default: 2000 ms each) */
  graceMs?: number;
  /**
   * The server started as the leader of group `pid` (recorded so a crash can be cleaned up).
   * `mark` is the value of its `SVC_MCP_GROUP` variable, which what it starts inherits.
   */
  onGroupStarted?: (pid: number, mark: string) => void;
  /** Group `pid` has been ended. */
  onGroupEnded?: (pid: number) => void;
  /** Longest stdout line (one JSON-RPC message). (Default: the SDK's 10 MiB) */
  maxMessageBytes?: number;
  /** Longest stderr line logged; a longer one is dropped, not cut (a cut could split a secret). (Default: 8 KiB) */
  maxStderrLineBytes?: number;
}

/**
 * Splits a byte stream into lines (`\n`, a trailing `\r` dropped) without concatenating the
 * buffered part on every chunk, so a peer that never ends its line costs linear time. A line
 * longer than `max` bytes is reported to `onOverflow` once and discarded, up to the next
 * newline.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  private discarding = false;

  constructor(
    private readonly max: number,
    private readonly onLine: (line: string) => void,
    private readonly onOverflow: () => void,
  ) {}

  /** The stream ended: a last line without its newline is still a line. */
  end(): void {
    if (this.size > 0 && !this.discarding) this.emit(Buffer.concat(this.parts, this.size));
    this.parts = [];
    this.size = 0;
    this.discarding = false;
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a, start); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.discarding) this.discarding = false;
      else if (this.size + piece.length > this.max) this.onOverflow();
      else this.emit(this.size === 0 ? piece : Buffer.concat([...this.parts, piece], this.size + piece.length));
      this.parts = [];
      this.size = 0;
    }
    if (start >= chunk.length || this.discarding) return;
    const rest = chunk.subarray(start);
    if (this.size + rest.length > this.max) {
      this.onOverflow();
      this.parts = [];
      this.size = 0;
      this.discarding = true;
    } else {
      this.parts.push(rest);
      this.size += rest.length;
    }
  }

  private emit(bytes: Buffer): void {
    const text = bytes.toString('utf8');
    this.onLine(text.endsWith('\r') ? text.slice(0, -1) : text);
  }
}

/**
 * How long a server that closed its stdout (or its stdin) may take to exit before svcd ends
 * it: one that runs on without them can never answer again.
 */
export const DEAF_GRACE_MS = 1000;

/** A message refused before any of it was written: the server never saw it. */
export class NotSentError extends Error {}

/** How long after a server exits its pipes may still bring output, before svcd closes them. */
export const PIPE_DRAIN_MS = 1000;

export class GroupStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private child: ChildProcess | null = null;
  private closedFired = false;
  /** close() has begun: our own end of stdin closing is no sign of a deaf server. */
  private closing = false;
  private exited: Promise<void> = Promise.resolve();

  constructor(private readonly opts: GroupStdioOptions) {}

  /** The server's pid, which is also its process group id. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  start(): Promise<void> {
    if (this.child) throw new Error('GroupStdioTransport already started');
    return new Promise((resolve, reject) => {
      // A mark the server's own children inherit: after a crash of svcd, a server that ended
      // at the close of its stdin can leave them running with no leader (mcp-groups.ts).
      const mark = randomUUID();
      const child = spawn(this.opts.command, this.opts.args, {
        env: { ...getDefaultEnvironment(), ...this.opts.env, [GROUP_MARK_VARIABLE]: mark },
        cwd: this.opts.cwd ?? undefined,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: useGroups,
        windowsHide: true,
        shell: false,
      });
      this.child = child;
      let spawned = false;
      this.exited = new Promise<void>((res) => child.once('exit', () => res()));
      child.once('error', (err) => {
        if (!spawned) reject(err);
        else this.onerror?.(err);
        this.fireClose();
      });
      child.once('spawn', () => {
        spawned = true;
        if (child.pid) {
          trackGroup(child.pid);
          this.opts.onGroupStarted?.(child.pid, mark);
        }
        resolve();
      });
      child.once('exit', () => {
        // The leader is gone: end whatever it left in its group, then report the close.
        if (child.pid) {
          killGroup(child.pid, 'SIGKILL');
          untrackGroup(child.pid);
          this.opts.onGroupEnded?.(child.pid);
        }
        this.fireClose();
        // A descendant that left the group (setsid) can hold the pipes open for good: once
        // the last output has had a moment to drain, svcd lets go of its ends, or every
        // restart of such a server would keep three descriptors.
        setTimeout(() => {
          if (child.stderr && !child.stderr.readableEnded) stderrLines.end(); // its last line, as 'end' would
          for (const s of [child.stdin, child.stdout, child.stderr]) if (s && !s.destroyed) s.destroy();
        }, PIPE_DRAIN_MS).unref();
      });
      // With no descriptor left for its pipes (EMFILE, ENFILE) Node hands back a child without
      // them and emits 'error' next: that error ("spawn node EMFILE") is the start's failure,
      // not a TypeError from reaching for a pipe that is not there.
      if (!child.stdin || !child.stdout || !child.stderr) return;
      // A server that closed its stdout, or its stdin (our write fails EPIPE), but runs on
      // would stay "ready" for good, every call waiting out its timeout: ended as if it had
      // exited, so the connector restarts it. Not at once: a server exiting closes them first.
      const deafened = (what: string) => {
        setTimeout(() => {
          if (child.exitCode !== null || child.signalCode !== null || this.closing) return;
          this.onerror?.(new Error(`MCP server closed its ${what} and did not exit; ending it`));
          void this.close();
        }, DEAF_GRACE_MS).unref();
      };
      child.stdin.on('error', (err) => {
        this.onerror?.(err);
        if ((err as NodeJS.ErrnoException).code === 'EPIPE') deafened('stdin');
      });
      child.stdout.on('end', () => deafened('stdout'));
      const maxMessage = this.opts.maxMessageBytes ?? STDIO_DEFAULT_MAX_BUFFER_SIZE;
      const stdout = new LineSplitter(
        maxMessage,
        (line) => {
          if (line.trim() === '') return;
          let msg: JSONRPCMessage;
          try {
            msg = deserializeMessage(line);
          } catch {
            // Its content is not quoted: a piece of it cut short could hold part of a secret
            // that redaction no longer recognises.
            this.onerror?.(new Error(`MCP server wrote a ${Buffer.byteLength(line)}-byte line that is not a JSON-RPC message on stdout; skipped`));
            return;
          }
          try {
            this.onmessage?.(msg);
          } catch (err) {
            this.onerror?.(err as Error);
          }
        },
        // Dropped, not fatal: ending the server would fail every other call in flight on it.
        // The request it answered times out; the splitter kept none of it.
        () => this.onerror?.(new Error(`MCP server wrote a stdout line over ${maxMessage} bytes; dropped`)),
      );
      child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
      child.stdout!.on('error', (err) => this.onerror?.(err));
      const maxStderr = this.opts.maxStderrLineBytes ?? 8192;
      const stderrLines = new LineSplitter(
        maxStderr,
        (line) => this.opts.onStderr?.(line),
        () => this.opts.onStderr?.(`(a stderr line over ${maxStderr} bytes, dropped)`),
      );
      child.stderr!.on('data', (chunk: Buffer) => stderrLines.push(chunk));
      child.stderr!.on('end', () => stderrLines.end()); // a last line without its newline (a crash message)
      child.stderr!.on('error', () => {});
    });
  }

  private fireClose(): void {
    if (this.closedFired) return;
    this.closedFired = true;
    this.onclose?.();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin;
      if (!stdin || this.child?.exitCode !== null || stdin.destroyed) return reject(new NotSentError('MCP server is not running'));
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** Closes stdin and sends SIGTERM to the whole group; SIGKILL after the grace period. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.closing = true;
    const grace = this.opts.graceMs ?? 2000;
    const wait = (ms: number) => Promise.race([this.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.stdin?.end();
      } catch {
        /* already gone */
      }
      if (child.pid) killGroup(child.pid, 'SIGTERM');
      if (!(await wait(grace)) && child.pid) {
        killGroup(child.pid, 'SIGKILL');
        await wait(grace);
      }
    }
    if (child.pid) {
      killGroup(child.pid, 'SIGKILL'); // stragglers of the group
      untrackGroup(child.pid);
      this.opts.onGroupEnded?.(child.pid);
    }
    this.fireClose();
  }
}

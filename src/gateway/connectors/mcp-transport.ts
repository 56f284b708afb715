/**
 * The stdio transport the MCP connector hands to the SDK's `Client` (decisions §9). It speaks
 * the SDK's own stdio framing (`ReadBuffer`, `serializeMessage`) and environment defaults
 * (`getDefaultEnvironment`); it differs from the SDK's `StdioClientTransport` in one way that
 * the gateway needs: the server is spawned as the leader of its own process group, so that
 * stopping it ends every process it started (an `npx` wrapper and the server under it, a
 * server's own workers), not just the first. stderr is always drained, line by line, to a
 * callback (the connector logs it through the redactor).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

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
  /** The server started as the leader of group `pid` (recorded so a crash can be cleaned up). */
  onGroupStarted?: (pid: number) => void;
  /** Group `pid` has been ended. */
  onGroupEnded?: (pid: number) => void;
}

const useGroups = process.platform !== 'win32';

/** Process groups still alive; killed on process exit so a crashing gateway leaves no servers behind. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;
function trackGroup(pid: number): void {
  liveGroups.add(pid);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const g of liveGroups) killGroup(g, 'SIGKILL');
    });
  }
}

/** True when `pid` leads a server group this process started and has not ended. */
export function isOwnGroup(pid: number): boolean {
  return liveGroups.has(pid);
}

/** Signals a whole process group (falls back to the single process where groups do not exist). */
export function killGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(useGroups ? -pid : pid, signal);
    return true;
  } catch {
    return false;
  }
}

export class GroupStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private child: ChildProcess | null = null;
  private readonly readBuffer = new ReadBuffer();
  private closedFired = false;
  private exited: Promise<void> = Promise.resolve();

  constructor(private readonly opts: GroupStdioOptions) {}

  /** The server's pid, which is also its process group id. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  start(): Promise<void> {
    if (this.child) throw new Error('GroupStdioTransport already started');
    return new Promise((resolve, reject) => {
      const child = spawn(this.opts.command, this.opts.args, {
        env: { ...getDefaultEnvironment(), ...this.opts.env },
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
          this.opts.onGroupStarted?.(child.pid);
        }
        resolve();
      });
      child.once('exit', () => {
        // The leader is gone: end whatever it left in its group, then report the close.
        if (child.pid) {
          killGroup(child.pid, 'SIGKILL');
          liveGroups.delete(child.pid);
          this.opts.onGroupEnded?.(child.pid);
        }
        this.fireClose();
      });
      child.stdin!.on('error', (err) => this.onerror?.(err));
      child.stdout!.on('data', (chunk: Buffer) => {
        try {
          this.readBuffer.append(chunk);
          for (;;) {
            const msg = this.readBuffer.readMessage();
            if (msg === null) break;
            this.onmessage?.(msg);
          }
        } catch (err) {
          this.onerror?.(err as Error);
        }
      });
      child.stdout!.on('error', (err) => this.onerror?.(err));
      const lines = createInterface({ input: child.stderr!, crlfDelay: Infinity });
      lines.on('line', (line) => this.opts.onStderr?.(line));
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
      if (!stdin || this.child?.exitCode !== null || stdin.destroyed) return reject(new Error('MCP server is not running'));
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** Closes stdin and sends SIGTERM to the whole group; SIGKILL after the grace period. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child) return;
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
      liveGroups.delete(child.pid);
      this.opts.onGroupEnded?.(child.pid);
    }
    this.readBuffer.clear();
    this.fireClose();
  }
}

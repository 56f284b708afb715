/**
 * Test harness: the real svcd factory on port 0 with a temp data dir (in-process), and the
 * built `svcd` binary as a child process for tests that need a real process (crash, SIGTERM).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { silentLogger } from '../../src/log/logger.js';
import { startSvcd, type RunningSvcd, type SvcdOptions } from '../../daemon/server.js';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { request } from './http-answer.js';
import { testPgStore } from './pg.js';

export const ROOT = resolve(import.meta.dirname, '../..');

/** A loopback URL nothing listens on: a port the system handed out, then closed again. */
export async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

/** Whether a process with this pid is alive (signal 0 asks without sending one). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function tempDir(prefix = 'svc-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface TestDaemon extends RunningSvcd, AsyncDisposable {
  dataDir: string;
  /** fetch against the kernel: path is below /v1. */
  kernel_: (path: string, init?: { method?: string; body?: unknown; headers?: Record<string, string> }) => Promise<{ status: number; body: any }>;
}

/** Starts svcd in-process on 127.0.0.1:0 with a fresh data dir. */
type KernelSection = Exclude<SvcdOptions['kernel'], false | undefined>;

export interface TestDaemonOptions extends Omit<Partial<SvcdOptions>, 'kernel'> {
  /** Overrides for the kernel section (dataDir and listen have test defaults). */
  kernel?: Partial<KernelSection>;
}

export async function startTestDaemon(opts: TestDaemonOptions = {}): Promise<TestDaemon> {
  const dataDir = opts.kernel?.dataDir ?? tempDir();
  // SVC_TEST_STORE=postgres: the kernel's store in a fresh PostgreSQL schema (test/helpers/pg.ts).
  const pgStore = opts.kernel?.store === undefined && opts.kernel?.db === undefined ? await testPgStore(opts.kernel?.dataDir) : null;
  let running: RunningSvcd;
  try {
    running = await startSvcd({
      logger: silentLogger,
      token: opts.token ?? null,
      ...opts,
      kernel: { listen: '127.0.0.1:0', synchronous: 'NORMAL', ...(pgStore?.options ?? {}), ...(opts.kernel ?? {}), dataDir },
    });
  } catch (err) {
    await pgStore?.drop();
    throw err;
  }
  if (pgStore) {
    const close = running.close.bind(running);
    running.close = async () => {
      await close();
      await pgStore.drop();
    };
  }
  const kernel_ = async (path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (opts.token && !headers.authorization) headers.authorization = `Bearer ${opts.token}`;
    const { status, body } = await request(running.kernelUrl!, path, { ...init, headers });
    return { status, body: body as unknown };
  };
  return Object.assign(running, {
    dataDir,
    kernel_,
    async [Symbol.asyncDispose]() {
      await running.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  });
}

/** GET (no body) or POST (a JSON body) to `{base}/v1{path}`; the answer's status and parsed JSON. */
export async function callJson(base: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

export interface SpawnedSvcd extends AsyncDisposable {
  child: ChildProcess;
  kernelUrl: string | null;
  gatewayUrl: string | null;
  stderr: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Spawns the built dist/daemon/main.js and waits for its JSON startup line. */
export async function spawnSvcd(args: string[], env: Record<string, string> = {}): Promise<SpawnedSvcd> {
  const child = spawn(process.execPath, [join(ROOT, 'dist/daemon/main.js'), ...args], {
    // Not the repository: a gateway without a data_dir would leave ./gateway-data there.
    cwd: tempDir(),
    env: { ...process.env, SVC_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
  const line = await new Promise<string>((res, rej) => {
    const rl = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => rej(new Error(`svcd did not start: ${err}`)), 15_000);
    rl.once('line', (l) => {
      clearTimeout(timer);
      res(l);
    });
    void exited.then((code) => {
      clearTimeout(timer);
      rej(new Error(`svcd exited ${code}: ${err}`));
    });
  });
  const addrs = JSON.parse(line) as { kernel: string | null; gateway: string | null };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  return { child, kernelUrl: addrs.kernel, gatewayUrl: addrs.gateway, stderr: () => err, stop, [Symbol.asyncDispose]: async () => void (await stop('SIGKILL')) };
}

/**
 * Waits until a process's output holds `text`. A line logged just after something a test can see over
 * HTTP (a worker's "step completed" follows the kernel's answer to its complete) can reach the
 * pipe a moment after the test sees it: tests that read a log after a state wait for the line
 * rather than race it.
 */
export async function waitOutput(output: () => string, text: string, ms = 5_000): Promise<string> {
  const end = Date.now() + ms;
  while (!output().includes(text) && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
  return output();
}

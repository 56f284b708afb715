/** Runs the built `svc` binary and captures its output and exit code. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './daemon.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A daemon address nothing answers on: port 2 is unused, and fetch does not refuse it (1 and 9 are Fetch "bad ports"). */
export const NO_DAEMON = 'http://127.0.0.1:2';

export function runSvc(args: string[], env: Record<string, string> = {}, stdin?: string): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'dist/cli/index.js'), ...args], {
      env: { ...process.env, SVC_KERNEL_URL: '', SVC_ACTOR: '', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    // Bytes gathered whole and decoded once: a chunk may end inside a multi-byte character.
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    // 'close', not 'exit': at 'exit' the pipes may still hold output not yet read.
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
    child.stdin.end(stdin ?? '');
  });
}

/** Small checks that an external baseline's server is there, so a missing one is reported, not a crash. */
import { createConnection } from 'node:net';

export function portOpen(port: number, host = '127.0.0.1', timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ port, host });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

export const PG_URL = process.env.SVC_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

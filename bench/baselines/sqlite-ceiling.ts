/**
 * The ceiling: raw better-sqlite3 write transactions with svc's durability settings (WAL,
 * synchronous FULL), each inserting one row and updating another — the smallest write a
 * kernel transaction makes. A kernel step cycle needs `txPerCycle` such transactions.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';

export function sqliteTxPerSecond(n: number, synchronous: 'FULL' | 'NORMAL' = 'FULL'): number {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-sqlite-'));
  const db = new Database(join(dir, 'ceiling.db'));
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    db.exec('CREATE TABLE item (id INTEGER PRIMARY KEY, body TEXT NOT NULL); CREATE TABLE head (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO head VALUES (1, 0);');
    const ins = db.prepare('INSERT INTO item (body) VALUES (?)');
    const upd = db.prepare('UPDATE head SET n = n + 1 WHERE id = 1');
    const body = JSON.stringify({ kind: 'step.completed', payload: { output: { ok: true } } });
    const tx = db.transaction(() => {
      ins.run(body);
      upd.run();
    });
    const t0 = performance.now();
    for (let i = 0; i < n; i++) tx.immediate();
    return (n / (performance.now() - t0)) * 1000;
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

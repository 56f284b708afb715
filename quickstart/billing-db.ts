#!/usr/bin/env node
/**
 * The demo billing database: applies fixtures/demo/billing.sql (customers, invoices, refunds)
 * to a fresh SQLite file. Used by the quickstart and the end-to-end tests; runnable on its own:
 *   node dist/quickstart/billing-db.js PATH
 */
import { isMainModule } from '../src/util/main-module.js';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';

/** The repository root (this file runs from quickstart/ under ts and dist/quickstart/ built). */
export function repoRoot(): string {
  let dir = resolve(fileURLToPath(import.meta.url), '..');
  for (let i = 0; i < 4; i++) {
    if (existsSync(resolve(dir, 'fixtures/demo/billing.sql'))) return dir;
    dir = resolve(dir, '..');
  }
  throw new Error('cannot find fixtures/demo/billing.sql above ' + fileURLToPath(import.meta.url));
}

/** Creates the billing database at `path` (replacing any file there); returns its absolute path. */
export function createBillingDb(path: string): string {
  const file = resolve(path);
  mkdirSync(dirname(file), { recursive: true });
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(file + suffix, { force: true });
  const sql = readFileSync(resolve(repoRoot(), 'fixtures/demo/billing.sql'), 'utf8');
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.exec(sql);
  } finally {
    db.close();
  }
  return file;
}


if (isMainModule(import.meta.url)) {
  const target = process.argv[2];
  if (!target) {
    process.stderr.write('usage: node dist/quickstart/billing-db.js PATH\n');
    process.exit(2);
  }
  process.stdout.write(createBillingDb(target) + '\n');
}

/**
 * PostgreSQL for the store's tests (decisions §11): SVC_TEST_PG_URL, else the local server's
 * `test` database. Each test file (or daemon) gets a schema of its own, dropped after; when
 * no server answers, the PostgreSQL tests skip and say why.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll } from 'vitest';
import { PgDb, pgConnection } from '../../src/store/pg-db.js';

export const PG_URL = process.env.SVC_TEST_PG_URL || 'postgres://127.0.0.1:5432/test';

let probed: Promise<string | null> | null = null;

/** Null when PG_URL answers; otherwise why not (printed by the tests that skip). */
export function pgUnreachable(): Promise<string | null> {
  probed ??= (async () => {
    const client = new pg.Client({ ...pgConnection(PG_URL), connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return null;
    } catch (err) {
      return `PostgreSQL at ${PG_URL} is unreachable (${(err as Error).message || (err as { code?: string }).code}); set SVC_TEST_PG_URL to run these tests`;
    } finally {
      await client.end().catch(() => undefined);
    }
  })();
  return probed;
}

/** Skips with a printed reason when PostgreSQL is unreachable: `describe.skipIf(await pgSkip('file'))`. */
export async function pgSkip(what: string): Promise<boolean> {
  const why = await pgUnreachable();
  if (why !== null) console.warn(`${what}: ${why}; its PostgreSQL tests are skipped`);
  return why !== null;
}

export interface PgSchema {
  schema: string;
  /** A store on the schema (the caller closes it). */
  open(max?: number): PgDb;
  drop(): Promise<void>;
}

/** A fresh schema `svc_test_<random>` in PG_URL's database. */
export async function createPgSchema(): Promise<PgSchema> {
  const schema = `svc_test_${randomBytes(6).toString('hex')}`;
  await admin(`CREATE SCHEMA ${schema}`);
  return {
    schema,
    open: (max?: number) => new PgDb({ connectionString: PG_URL, schema, max }),
    drop: () => admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`),
  };
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client(pgConnection(PG_URL));
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The store integration tests use: SVC_TEST_STORE=postgres for PostgreSQL, else SQLite (the default). */
export const TEST_STORE = process.env.SVC_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';

/** Schemas of data directories a test named itself (it may start svcd on one again): dropped after the file. */
const kept = new Map<string, PgSchema>();
if (TEST_STORE === 'postgres') {
  afterAll(async () => {
    for (const s of kept.values()) await s.drop();
    kept.clear();
  });
}

/**
 * With SVC_TEST_STORE=postgres, the kernel options of a fresh schema and its drop; null for
 * SQLite. An unreachable server fails the test: asked for PostgreSQL, a silent SQLite would
 * pass for it. `dataDir`: a directory the test chose, which a restart names again: its schema
 * is the same one each time and lives until the file's tests end.
 */
export async function testPgStore(dataDir?: string): Promise<{ options: { store: string; storeSchema: string }; drop(): Promise<void> } | null> {
  if (TEST_STORE !== 'postgres') return null;
  const why = await pgUnreachable();
  if (why !== null) throw new Error(`SVC_TEST_STORE=postgres: ${why}`);
  if (dataDir !== undefined) {
    let s = kept.get(dataDir);
    if (!s) kept.set(dataDir, (s = await createPgSchema()));
    return { options: { store: PG_URL, storeSchema: s.schema }, drop: async () => undefined };
  }
  const s = await createPgSchema();
  return { options: { store: PG_URL, storeSchema: s.schema }, drop: s.drop };
}

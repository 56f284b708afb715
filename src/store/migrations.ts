/**
 * Every kernel schema migration, in the order they apply. Each domain owns its tables in
 * its own `schema.ts`; ids are prefixed with the domain and never edited once shipped.
 */
import type { Migration } from './sql-db.js';

export const KERNEL_MIGRATIONS: Migration[] = [];

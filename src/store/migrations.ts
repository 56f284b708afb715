/**
 * Every kernel schema migration, in the order they apply. Each domain owns its tables in
 * its own `schema.ts`; ids are prefixed with the domain and never edited once shipped.
 */
import type { Migration } from './sql-db.js';
import { RUN_MIGRATIONS } from '../kernel/schema.js';
import { REMIT_MIGRATIONS } from '../remit/schema.js';
import { BUNDLE_MIGRATIONS } from '../bundle/schema.js';
import { POLICY_MIGRATIONS } from '../policy/schema.js';

// Remits first: runs refer to remits.
export const KERNEL_MIGRATIONS: Migration[] = [...REMIT_MIGRATIONS, ...RUN_MIGRATIONS, ...BUNDLE_MIGRATIONS, ...POLICY_MIGRATIONS];

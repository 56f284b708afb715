#!/usr/bin/env node
/**
 * Marks the package's bins executable after `tsc`. npm sets the bit when it links bins at install
 * time, but every later build rewrites the files without it, so after `npm test` (which builds)
 * `npx svc` failed with "Permission denied".
 */
import { chmodSync, existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { bin = {} } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
for (const rel of Object.values(bin)) {
  const file = join(root, rel);
  if (!existsSync(file)) {
    console.error(`mark-bins-executable: ${rel} was not built`);
    process.exit(1);
  }
  chmodSync(file, statSync(file).mode | 0o111);
}

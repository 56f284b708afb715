#!/usr/bin/env node
/**
 * `npm run validators`: writes src/validators/compiled/*.ts from the schemas they check (see
 * src/validators/generate.ts), using the built generator in dist/. Run after changing one of
 * those schemas; test/unit/validators-compiled.test.ts says when that was forgotten.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { compiledSource, VALIDATOR_MODULES } = await import(join(root, 'dist/src/validators/generate.js'));
const dir = join(root, 'src/validators/compiled');
mkdirSync(dir, { recursive: true });
for (const mod of VALIDATOR_MODULES) {
  const file = join(dir, `${mod.name}.ts`);
  writeFileSync(file, compiledSource(mod));
  console.log(`wrote ${file.slice(root.length + 1)}`);
}

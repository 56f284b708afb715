// src/util/durable-file.ts, used for the control-plane key file (decisions §2: mode 0600).
// fsync itself cannot be observed here; what can: the contents, the mode even over a leftover
// temp file of another mode, and no temp file left behind.
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeFileDurably } from '../../src/util/durable-file.js';
import { tempDir } from '../helpers/daemon.js';

describe('writeFileDurably', () => {
  it('replaces the file with the new contents at the given mode, leaving no temp file', () => {
    const dir = tempDir();
    const file = join(dir, 'control-plane.json');
    writeFileSync(file, 'old');
    writeFileSync(`${file}.tmp`, 'half-written by a crashed start', { mode: 0o644 });
    writeFileDurably(file, '{"key_id":"cp-x"}\n', 0o600);
    expect(readFileSync(file, 'utf8')).toBe('{"key_id":"cp-x"}\n');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(existsSync(`${file}.tmp`)).toBe(false);
  });
});

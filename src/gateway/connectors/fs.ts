/**
 * The fs connector (interface 2.10, decisions §9): `read`, `list` (reads) and `write` under a
 * root. Every path is resolved to its real path (symlinks followed; for a path that does not
 * exist yet, its deepest existing ancestor) and must stay under the real root, else the call
 * is refused `scope_not_granted`. The scope is `fs:path:<real directory>`. The operation then
 * runs on the checked real path with O_NOFOLLOW, never on the caller's spelling of it.
 *
 * Between the scope check and the operation another process may swap a directory on the way
 * for a symlink. So the call resolves the path again and its directory must be a granted
 * scope; that directory is then opened, the kernel asked where the handle really points
 * (/proc/self/fd), and every operation goes through the handle's /proc/self/fd/<n>/<name>
 * path: the directory that was checked, whatever is renamed meanwhile (openat(2) semantics,
 * which Node does not offer). Missing directories of a write are made one at a time the same
 * way. Where /proc is not mounted, the checks fall back to paths.
 */
import { constants } from 'node:fs';
import { existsSync } from 'node:fs';
import { lstat, mkdir, open, opendir, readlink, realpath, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import type { Dirent } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { FsConnectorConfig } from '../config.js';
import { decodeUtf8Strict } from '../../encoding/utf8.js';
import { hasLoneSurrogate } from '../../encoding/well-formed-json.js';
import { compileInputSchema } from '../schema-validator.js';
import { ArgsInvalid, ConnectorSetupError, descriptor, DeterministicFailure, RefusedBeforeAsking, ScopeRefusal, UpstreamError, type CallContext, type Connector, type ConnectorTool } from './types.js';

const PATH = { type: 'string', minLength: 1, maxLength: 4096, description: 'relative to the root, or absolute under it' };
export const FS_SCHEMAS = {
  read: { type: 'object', required: ['path'], additionalProperties: false, properties: { path: PATH } },
  list: { type: 'object', required: [], additionalProperties: false, properties: { path: PATH } },
  write: { type: 'object', required: ['path', 'content'], additionalProperties: false, properties: { path: PATH, content: { type: 'string' } } },
} as const;

const DEFAULT_CONTRACTS = {
  read: { content: 'string' },
  list: { entries: 'list' },
  write: { bytes: 'number' },
} as const;

// ENXIO, ENODEV: a socket or a device without its driver opened non-blocking (read): the
// path names no file, which a retry does not change and the breaker must not count.
const DETERMINISTIC = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'EACCES', 'EPERM', 'EEXIST', 'ELOOP', 'ENAMETOOLONG', 'EINVAL', 'ENOTEMPTY', 'ENXIO', 'ENODEV']);

/** Whether descriptors can be followed by path (Linux's /proc): the openat(2) stand-in. */
const PROC_FD = existsSync('/proc/self/fd');
/**
 * Linux's O_PATH (not in Node 20's fs.constants): a handle that names the directory without
 * reading it, so a directory one may pass through but not list (0711) still serves a read
 * or a write in it, as a path did; `list` reads its listing through the handle's path.
 */
const O_PATH = 0o10000000;
const DIR_FLAGS = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;

async function isSymlink(path: string): Promise<boolean> {
  return lstat(path).then((st) => st.isSymbolicLink(), () => false);
}

/** A symlink there now, or a directory (one swapped out and back): not what a failed directory open found. */
async function swappedIn(path: string): Promise<boolean> {
  return lstat(path).then((st) => st.isSymbolicLink() || st.isDirectory(), () => false);
}

/** Most entries `list` returns; a larger directory is a deterministic failure, not a 50 MB answer. */
export const MAX_LIST_ENTRIES = 10_000;

function fsFailure(err: unknown, what: string): Error {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  const msg = `${what}: ${code || (err as Error).message}`;
  return DETERMINISTIC.has(code) ? new DeterministicFailure(msg, { errno: code }) : new UpstreamError(msg, { errno: code || null });
}

export class FsConnector implements Connector {
  readonly type = 'fs' as const;
  readonly name: string;
  readonly probe;
  readonly timeoutMs: number;
  private realRoot = '';
  private readonly list: ConnectorTool[];

  constructor(private readonly cfg: FsConnectorConfig) {
    this.name = cfg.name;
    this.probe = cfg.probe;
    this.timeoutMs = cfg.timeout_ms;
    this.list = (['read', 'list', 'write'] as const).map((op) => {
      const t = cfg.tools[op] ?? {};
      const schema = (t.input_schema ?? FS_SCHEMAS[op]) as Record<string, unknown>;
      return {
        operation: op,
        validate: compileInputSchema(schema),
        descriptor: descriptor({
          id: `${cfg.name}.${op}`,
          connector: cfg.name,
          description: t.description ?? { read: 'Read a UTF-8 file', list: 'List a directory', write: 'Write a UTF-8 file' }[op],
          writes: op === 'write',
          input_schema: schema,
          scope_derivation: 'directory',
          contract: t.contract ?? { required: { ...DEFAULT_CONTRACTS[op] } },
          data_classes: t.data_classes ?? {},
        }),
      };
    });
  }

  async start(): Promise<void> {
    try {
      this.realRoot = await realpath(this.cfg.root);
      if (!(await stat(this.realRoot)).isDirectory()) throw new Error('not a directory');
    } catch (err) {
      throw new ConnectorSetupError([`/root: ${this.cfg.root} is not a usable directory: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`]);
    }
  }

  tools(): ConnectorTool[] {
    return this.list;
  }

  /** The real path of `p`: symlinks resolved as far as the path exists; refused outside the root. */
  async resolveReal(p: unknown): Promise<string> {
    // A NUL byte can name no file: bad input (422), not an upstream failure (decisions §10).
    if (typeof p === 'string' && p.includes('\0')) throw new ArgsInvalid('path contains a NUL byte', '/path');
    // A lone surrogate has no UTF-8 form: node would write U+FFFD, naming another file.
    if (typeof p === 'string' && hasLoneSurrogate(p)) throw new ArgsInvalid('path is not well-formed Unicode (a lone surrogate)', '/path');
    const target = resolve(this.realRoot, typeof p === 'string' && p !== '' ? p : '.');
    const rest: string[] = [];
    let cur = target;
    let real: string;
    for (;;) {
      try {
        // As bytes: a directory whose name is not UTF-8 would come back with U+FFFD in its
        // place, and every later step would name some other file.
        const bytes = await realpath(cur, { encoding: 'buffer' });
        const name = decodeUtf8Strict(bytes);
        if (name === null) throw new DeterministicFailure('path resolves through a file name that is not UTF-8; it cannot be named in a request');
        real = name;
        break;
      } catch (err) {
        if (err instanceof DeterministicFailure) throw err;
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw fsFailure(err, 'cannot resolve path');
        const parent = dirname(cur);
        if (parent === cur) throw new ScopeRefusal('path does not resolve under the root');
        rest.unshift(basename(cur));
        cur = parent;
      }
    }
    const full = rest.length ? join(real, ...rest) : real;
    if (full !== this.realRoot && !full.startsWith(this.realRoot + sep)) {
      throw new ScopeRefusal(`path resolves outside the root of connector ${this.name}`);
    }
    return full;
  }

  async deriveScopes(operation: string, args: Record<string, unknown>): Promise<string[]> {
    return [`fs:path:${this.directoryOf(operation, await this.resolveReal(args.path), args.path)}`];
  }

  /** The directory an operation on `real` (`raw` as given) works in: the one listed, or the file's. */
  private directoryOf(operation: string, real: string, raw: unknown): string {
    // A file's directory would be the root's parent, outside the root (and a write's temp file with it).
    if (operation !== 'list' && real === this.realRoot) throw new ArgsInvalid(`path names the root of connector ${this.name}, a directory; read and write take a file`, '/path');
    // `a/` names a directory (POSIX: ENOTDIR for a file); resolving drops the slash, and a
    // write would make a file `a`.
    if (operation !== 'list' && typeof raw === 'string' && /\/\.?$/.test(raw)) throw new ArgsInvalid(`path ${JSON.stringify(raw)} ends in a slash and names a directory; read and write take a file`, '/path');
    return operation === 'list' ? real : dirname(real);
  }

  /**
   * Opens the directory `dir` (a real path under the root) and checks the handle is that
   * directory: a component on the way swapped for a symlink since it was resolved is
   * refused. With `create`, missing directories are made one at a time, each under the
   * handle of its checked parent. Null where /proc is not mounted (paths are used instead).
   */
  private async openDirectory(dir: string, create: boolean): Promise<FileHandle | null> {
    if (!PROC_FD) {
      if (create) await mkdir(dir, { recursive: true });
      return null;
    }
    const missing: string[] = [];
    let at = dir;
    let fh: FileHandle;
    for (;;) {
      try {
        fh = await open(at, DIR_FLAGS);
        break;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // It resolved as a directory a moment ago: a symlink has been put in its place
        // (O_NOFOLLOW with O_DIRECTORY says ENOTDIR for a symlink, ELOOP on some systems), or
        // was and has been swapped back (a directory again). A path through a file, a FIFO
        // or a device is the caller's own ENOTDIR.
        if ((code === 'ENOTDIR' || code === 'ELOOP') && (await swappedIn(at))) throw new ScopeRefusal(`path ${this.rel(at)} changed while it was opened (a symlink stood in its place)`);
        if (!create || code !== 'ENOENT' || at === this.realRoot) throw err;
        missing.unshift(basename(at));
        at = dirname(at);
      }
    }
    try {
      await this.checkOpened(fh, at);
      for (const name of missing) {
        const child = `/proc/self/fd/${fh.fd}/${name}`;
        await mkdir(child).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
        const next = await open(child, DIR_FLAGS).catch(async (err: NodeJS.ErrnoException) => {
          throw (err.code === 'ENOTDIR' || err.code === 'ELOOP') && (await isSymlink(child)) ? new ScopeRefusal(`path ${this.rel(join(at, name))} changed while it was made (a symlink now stands in its place)`) : err;
        });
        const parent = fh;
        fh = next; // closed by the catch below from here on, whatever the parent's close does
        await parent.close();
        at = join(at, name);
        await this.checkOpened(fh, at);
      }
      return fh;
    } catch (err) {
      await fh.close().catch(() => {});
      throw err;
    }
  }

  /** `name` in the directory behind `dirHandle` (or at `dir` by path, without /proc). */
  private static within(dirHandle: FileHandle | null, dir: string, name: string): string {
    return dirHandle ? `/proc/self/fd/${dirHandle.fd}/${name}` : join(dir, name);
  }

  /**
   * The file just opened is the one the scope was derived for. A directory on the way can be
   * swapped for a symlink between resolving the path and opening it (O_NOFOLLOW guards the
   * last component only), so the kernel is asked where the descriptor really points
   * (/proc/self/fd, Linux); elsewhere the check is skipped.
   */
  private async checkOpened(fh: FileHandle, expected: string): Promise<void> {
    if (!PROC_FD) return;
    let actual: string;
    try {
      actual = await readlink(`/proc/self/fd/${fh.fd}`);
    } catch {
      return;
    }
    if (actual !== expected) throw new ScopeRefusal(`path ${this.rel(expected)} changed while it was opened (it now leads to ${actual.startsWith(this.realRoot + sep) ? this.rel(actual) : 'outside the root'})`);
  }

  private rel(real: string): string {
    return relative(this.realRoot, real) || '.';
  }

  async call(operation: string, args: Record<string, unknown>, ctx?: CallContext): Promise<unknown> {
    // Resolved again: the scope granted was for the path as it resolved a moment ago.
    const real = await this.resolveReal(args.path);
    const dir = this.directoryOf(operation, real, args.path);
    const scope = `fs:path:${dir}`;
    if (ctx?.derivedScopes && !ctx.derivedScopes.includes(scope) && !ctx.enterScope(scope)) {
      throw new ScopeRefusal(`path ${this.rel(real)} changed while it was checked: it now leads to ${scope}, which is not granted`);
    }
    let dirHandle: FileHandle | null;
    try {
      dirHandle = await this.openDirectory(dir, operation === 'write');
    } catch (err) {
      if (err instanceof ScopeRefusal) throw err;
      throw fsFailure(err, `cannot ${operation === 'read' ? 'open' : operation} ${this.rel(real)}`);
    }
    try {
      return await this.run(operation, real, dirHandle, args);
    } finally {
      await dirHandle?.close();
    }
  }

  private async run(operation: string, real: string, dirHandle: FileHandle | null, args: Record<string, unknown>): Promise<unknown> {
    const dir = dirname(real);
    const fileName = basename(real);
    switch (operation) {
      case 'read': {
        let fh;
        try {
          // O_NONBLOCK: opening a FIFO (or a device) for reading would otherwise wait for a
          // writer on one of libuv's four pool threads, for good; four such calls would stall
          // every fs call and the kernel's fsyncs behind them. The fstat below refuses it.
          fh = await open(FsConnector.within(dirHandle, dir, fileName), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
        } catch (err) {
          throw fsFailure(err, `cannot open ${this.rel(real)}`);
        }
        try {
          await this.checkOpened(fh, real);
          const st = await fh.stat();
          if (!st.isFile()) throw new DeterministicFailure(`${this.rel(real)} is not a regular file`);
          const max = this.cfg.max_file_bytes;
          const tooLarge = () => new DeterministicFailure(`${this.rel(real)} is larger than ${max} bytes`);
          if (st.size > max) throw tooLarge();
          // The file may grow after the fstat: read until EOF, never more than one byte past
          // the bound, into a buffer sized for what fstat saw.
          let buf = Buffer.allocUnsafe(Math.min(max + 1, st.size + 1));
          let got = 0;
          for (;;) {
            if (got === buf.length) {
              if (got > max) throw tooLarge();
              const bigger = Buffer.allocUnsafe(Math.min(max + 1, buf.length * 2));
              buf.copy(bigger, 0, 0, got);
              buf = bigger;
            }
            const { bytesRead } = await fh.read(buf, got, buf.length - got, got);
            if (bytesRead === 0) break;
            got += bytesRead;
          }
          if (got > max) throw tooLarge();
          return { path: this.rel(real), content: buf.toString('utf8', 0, got), size: got };
        } catch (err) {
          if (err instanceof DeterministicFailure || err instanceof ScopeRefusal) throw err;
          throw fsFailure(err, `cannot read ${this.rel(real)}`);
        } finally {
          await fh.close();
        }
      }
      case 'list': {
        try {
          // The listing of the checked handle (here the listed directory itself). Names as
          // bytes: one that is not UTF-8 cannot be named back in a JSON `path`, so it is
          // counted, not listed with replacement characters that name no file.
          // (node takes 'buffer' here; @types/node 20 lists string encodings only)
          const listing = await opendir(dirHandle ? `/proc/self/fd/${dirHandle.fd}` : real, { encoding: 'buffer' as BufferEncoding });
          const entries: Array<{ name: string; type: string }> = [];
          let notUtf8 = 0;
          try {
            for await (const d of listing as AsyncIterable<Dirent<Buffer>>) {
              if (entries.length + notUtf8 === MAX_LIST_ENTRIES) throw new DeterministicFailure(`${this.rel(real)} has more than ${MAX_LIST_ENTRIES} entries`);
              const name = decodeUtf8Strict(d.name);
              if (name === null) notUtf8++;
              else entries.push({ name, type: d.isFile() ? 'file' : d.isDirectory() ? 'dir' : d.isSymbolicLink() ? 'symlink' : 'other' });
            }
          } finally {
            await listing.close().catch(() => {}); // already closed when the loop ran to its end
          }
          entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
          return { path: this.rel(real), entries, ...(notUtf8 > 0 ? { not_utf8: notUtf8 } : {}) };
        } catch (err) {
          if (err instanceof DeterministicFailure) throw err;
          throw fsFailure(err, `cannot list ${this.rel(real)}`);
        }
      }
      case 'write': {
        const content = String(args.content ?? '');
        // Not named after the file: a name of 255 bytes, legal, would leave no room for more.
        const tmpName = `.svc-write-${randomBytes(6).toString('hex')}.tmp`;
        const tmp = FsConnector.within(dirHandle, dir, tmpName);
        try {
          const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
          try {
            await this.checkOpened(fh, join(dir, tmpName));
            await fh.writeFile(content, 'utf8');
            await fh.sync();
          } finally {
            await fh.close();
          }
          await rename(tmp, FsConnector.within(dirHandle, dir, fileName));
        } catch (err) {
          await unlink(tmp).catch(() => {});
          if (err instanceof ScopeRefusal) throw err;
          throw fsFailure(err, `cannot write ${this.rel(real)}`);
        }
        return { path: this.rel(real), bytes: Buffer.byteLength(content, 'utf8') };
      }
      default:
        throw new RefusedBeforeAsking(`unknown operation ${operation}`);
    }
  }

  async close(): Promise<void> {}
}

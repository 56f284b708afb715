/**
 * The sqlite connector (interface 2.10, decisions §9): named statements with `:param`
 * parameters and `:now`. The tables a statement touches are found once at load from SQLite
 * itself — the `OpenRead`/`OpenWrite` opcodes of its `EXPLAIN` program mapped through
 * `sqlite_schema` root pages, and the VOpen/VUpdate of virtual tables such as FTS5 — so a
 * view counts as the tables under it and a trigger's writes count too, and no SQL text is
 * parsed for scopes. Read tools run on a read-only
 * connection, so a read tool cannot write even if its statement were changed underneath.
 * Statements run in a child process (sqlite-host.ts), killed when a call is abandoned, so a
 * slow one never holds up svcd; lock waits are bounded (BUSY_TIMEOUT_MS) and a read stops
 * at the row that takes its result over MAX_RESULT_BYTES.
 */
import Database from 'better-sqlite3';
import { isoTime } from '../../clock.js';
import type { ContractType } from '../../types.js';
import { DEFAULT_MAX_BYTES, type SqliteConnectorConfig } from '../config.js';
import { pointerToken } from '../../encoding/json-pointer.js';
import { compileInputSchema } from '../schema-validator.js';
import { classifyFailure, StatementFailureError, StatementHost, type StatementMode } from './sqlite-host.js';
import { ArgsInvalid, ConnectorSetupError, descriptor, DeterministicFailure, NotAttempted, RefusedBeforeAsking, UpstreamError, type CallContext, type Connector, type ConnectorTool } from './types.js';

interface SqliteTool extends ConnectorTool {
  params: string[];
  /** Found at load, and again after a schema change; null when it no longer prepares. */
  tables: string[] | null;
  /** Why the tables could not be found again (SQLite's message, such as `no such column: c.email`); null while they are. */
  broken: string | null;
  /** The statement as prepared (trimmed, without a final `;`). */
  sql: string;
  writes: boolean;
  mode: StatementMode;
}

/**
 * The `:name` parameters of a statement, in order of first use, skipping string literals,
 * quoted identifiers and comments. Other parameter styles are reported by name.
 */
export function namedParameters(sql: string): { names: string[]; others: string[] } {
  const names: string[] = [];
  const others: string[] = [];
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i]!;
    if (c === "'" || c === '"' || c === '`') {
      const end = sql.indexOf(c, i + 1);
      // doubled quotes ('') simply re-enter the loop at the second quote
      i = end === -1 ? n : end + 1;
    } else if (c === '[') {
      const end = sql.indexOf(']', i + 1);
      i = end === -1 ? n : end + 1;
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? n : end + 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end === -1 ? n : end + 2;
    } else if (c === ':' || c === '@' || c === '$' || c === '?') {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1));
      if (c === ':' && m) {
        if (!names.includes(m[0])) names.push(m[0]);
        i += 1 + m[0].length;
      } else if (c === '?') {
        const d = /^\d*/.exec(sql.slice(i + 1))![0];
        others.push('?' + d);
        i += 1 + d.length;
      } else if (m) {
        others.push(c + m[0]);
        i += 1 + m[0].length;
      } else i++;
    } else i++;
  }
  return { names, others };
}

/**
 * Tables a statement reads or writes, from its EXPLAIN program (triggers and views included).
 * The schema table itself counts (page 1, which `sqlite_schema` does not list): reading it
 * discloses every table's definition, so it takes a grant of `sql:table:sqlite_schema`. Other
 * `sqlite_` tables (`sqlite_sequence`, `sqlite_stat1`) are SQLite's bookkeeping for the tables
 * they serve, which already need their own grants.
 */
export function tablesTouched(db: Database.Database, sql: string, params: string[], schema: SchemaMap = schemaMap(db)): string[] {
  // Neither kind opens a b-tree, so EXPLAIN would find no table: a PRAGMA reads (or sets) what
  // the schema holds and how the database is kept, as reading sqlite_schema does; ATTACH and
  // DETACH change what the connection reaches, which no scope describes.
  const verb = leadingKeyword(sql);
  if (verb === 'ATTACH' || verb === 'DETACH') throw new Error(`${verb} changes which databases the connection reaches, not data: it cannot be a tool`);
  if (verb === 'VACUUM') throw new Error('VACUUM rewrites the whole file (or, with INTO, copies it wherever its argument says): it cannot be a tool');
  if (verb === 'PRAGMA') return ['sqlite_schema'];
  const { roots, vtabs } = schema;
  const binds = Object.fromEntries(params.map((p) => [p, null]));
  const program = db.prepare(`EXPLAIN ${sql}`).all(binds) as ExplainOp[];
  const tables: string[] = [];
  const add = (name: string) => {
    if (!tables.includes(name)) tables.push(name);
  };
  const addRoot = (root: number, db: number) => {
    if (db !== 0) return; // 1 = temp, >1 = attached databases: not this connector's tables
    const name = roots.get(root);
    if (name && (name === 'sqlite_schema' || !name.startsWith('sqlite_'))) add(name);
  };
  for (const op of program) {
    if (op.opcode === 'OpenRead' || op.opcode === 'OpenWrite' || op.opcode === 'ReopenIdx') addRoot(op.p2, op.p3);
    // A DELETE without WHERE empties the b-tree without opening it (Clear root=P1 db=P2), as
    // a trigger's can; Destroy (root=P1 db=P3) drops one.
    else if (op.opcode === 'Clear') addRoot(op.p1, op.p2);
    else if (op.opcode === 'Destroy') addRoot(op.p1, op.p3);
    else if (op.opcode === 'VDestroy' && op.p1 === 0 && typeof op.p4 === 'string') add(op.p4); // DROP of a virtual table: P4 names it
    else if (typeof op.p4 === 'string' && op.p4.startsWith('vtab:')) {
      const name = vtabs.get(op.p4);
      if (name === undefined) {
        throw new Error('the statement reads a virtual table that is not in the schema (a table-valued function such as pragma_table_info or dbstat): its scope cannot be derived');
      }
      if (name !== null) add(name);
    }
  }
  return tables;
}

/** The statement's first keyword, upper-cased, past whitespace and comments. */
function leadingKeyword(sql: string): string {
  const rest = sql.replace(/^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?(?:\*\/|$))*/, '');
  return (/^[A-Za-z]+/.exec(rest)?.[0] ?? '').toUpperCase();
}

/**
 * Parameters no argument can ever fill: the schema allows no property but those it lists
 * (top-level additionalProperties: false, no patternProperties), and the parameter is not one
 * of them. JSON Schema's additionalProperties sees only its sibling properties, so a name
 * listed only under allOf or $ref is refused all the same.
 */
function unreachableParams(schema: Record<string, unknown>, params: string[]): string[] {
  if (schema.additionalProperties !== false || schema.patternProperties !== undefined) return [];
  const props = schema.properties !== null && typeof schema.properties === 'object' && !Array.isArray(schema.properties) ? (schema.properties as Record<string, unknown>) : {};
  return params.filter((p) => !Object.hasOwn(props, p));
}

function sameTables(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((t) => b.includes(t));
}

/** What EXPLAIN's operands point at: b-tree root pages and virtual-table objects, by table. */
export interface SchemaMap {
  roots: Map<number, string>;
  vtabs: Map<string, string | null>;
}

/** The connection's schema as tablesTouched reads it: built once for all of a connector's statements. */
export function schemaMap(db: Database.Database): SchemaMap {
  const roots = new Map<number, string>([[1, 'sqlite_schema']]);
  for (const r of db.prepare("SELECT type, name, tbl_name, rootpage FROM sqlite_schema WHERE rootpage > 0").all() as Array<{ type: string; name: string; tbl_name: string; rootpage: number }>) {
    roots.set(r.rootpage, r.type === 'index' ? r.tbl_name : r.name);
  }
  return { roots, vtabs: virtualTables(db) };
}

interface ExplainOp {
  opcode: string;
  p1: number;
  p2: number;
  p3: number;
  p4: unknown;
}

/**
 * Virtual tables (FTS5, R*Tree, …) have no b-tree of their own: a program reads and writes
 * them through VOpen/VUpdate, whose P4 names the connection's object for that table
 * (`vtab:<address>`), the same in every statement on the connection. Each is named here by
 * the program of a plain select on it. `json_each` and `json_tree` read only their arguments
 * and need no grant (null); any other vtab is not in the map, and the statement is refused.
 */
function virtualTables(db: Database.Database): Map<string, string | null> {
  const out = new Map<string, string | null>();
  const vtabOf = (sql: string): string | undefined => {
    try {
      const op = (db.prepare(`EXPLAIN ${sql}`).all() as ExplainOp[]).find((o) => o.opcode === 'VOpen');
      return typeof op?.p4 === 'string' ? op.p4 : undefined;
    } catch {
      return undefined; // a module this build lacks: no statement can use that table either
    }
  };
  const declared = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND rootpage = 0 AND sql LIKE 'CREATE VIRTUAL TABLE%'").all() as Array<{ name: string }>;
  for (const { name } of declared) {
    const id = vtabOf(`SELECT * FROM "${name.replaceAll('"', '""')}"`);
    if (id) out.set(id, name);
  }
  for (const fn of ['json_each', 'json_tree']) {
    const id = vtabOf(`SELECT * FROM ${fn}('[]')`);
    if (id) out.set(id, null);
  }
  return out;
}

const DETERMINISTIC_CODES = /^SQLITE_(CONSTRAINT|MISMATCH|TOOBIG|RANGE|ERROR|AUTH)/;
/**
 * The file, not the statement: made read-only, replaced or deleted under the connections
 * (SQLITE_READONLY_DBMOVED), or failing I/O. An upstream error (an operator can fix it, and a
 * retry should then succeed, not replay a stored failure), and the connections are reopened.
 */
const FILE_CODES = /^SQLITE_(READONLY|CANTOPEN|IOERR|CORRUPT|NOTADB)/;

/** How long a statement waits for a lock another process holds. */
const BUSY_TIMEOUT_MS = 1000;

/** How long finding the tables again after a schema change waits for a writer's lock (svcd's thread). */
const REFIND_BUSY_MS = 250;
/** How often a call of a tool whose statement no longer prepares looks at the schema again. */
const BROKEN_LOOK_EVERY_MS = 1000;

/** Largest select result, as JSON text. */
export const MAX_RESULT_BYTES = DEFAULT_MAX_BYTES;

export class SqliteConnector implements Connector {
  readonly type = 'sqlite' as const;
  readonly name: string;
  readonly probe;
  readonly timeoutMs: number;
  /** Runs the statements once start() has checked them all. */
  private host: StatementHost | null = null;
  /** The file's `PRAGMA schema_version` the tools' tables were found for. */
  private schemaVersion = 0;
  /** When a broken tool's call last had the tables looked for again (performance.now(): a clock stepped back must not stop the looks). */
  private lastBrokenLook = -Infinity;
  private readonly list = new Map<string, SqliteTool>();

  constructor(private readonly cfg: SqliteConnectorConfig) {
    this.name = cfg.name;
    this.probe = cfg.probe;
    this.timeoutMs = cfg.timeout_ms;
  }

  /** Setup problems are `/pointer: message` within this connector's config (the gateway adds `/connectors/<i>`). */
  async start(): Promise<void> {
    // The load-time checks run here, on connections closed once they are done; calls run in
    // the host's child process.
    let rw: Database.Database | undefined;
    let ro: Database.Database;
    try {
      rw = new Database(this.cfg.path, { fileMustExist: true });
      ro = new Database(this.cfg.path, { fileMustExist: true, readonly: true });
    } catch (err) {
      rw?.close();
      throw new ConnectorSetupError([`/path: cannot open ${this.cfg.path}: ${(err as Error).message}`]);
    }
    try {
      this.schemaVersion = Number(rw.pragma('schema_version', { simple: true }));
      this.checkStatements(rw, ro);
    } finally {
      ro.close();
      rw.close();
    }
    this.host = new StatementHost({
      name: this.name,
      path: this.cfg.path,
      statements: [...this.list.values()].map((t) => ({ op: t.operation, sql: t.sql, writes: t.writes, mode: t.mode, transaction: leadingKeyword(t.sql) !== 'PRAGMA' })),
      busyTimeoutMs: BUSY_TIMEOUT_MS,
      maxResultBytes: MAX_RESULT_BYTES,
      fileCodes: FILE_CODES.source,
    });
    const problem = await this.host.start();
    if (problem !== null) {
      await this.close();
      throw new ConnectorSetupError([`/path: ${problem}`]);
    }
  }

  /** Prepares, explains and describes every tool; throws ConnectorSetupError listing every fault. */
  private checkStatements(rw: Database.Database, ro: Database.Database): void {
    const problems: string[] = [];
    const schema = schemaMap(rw);
    for (const [op, t] of Object.entries(this.cfg.tools)) {
      const where = `/tools/${pointerToken(op)}`;
      const sql = (t.statement ?? '').trim().replace(/;\s*$/, '');
      const { names, others } = namedParameters(sql);
      if (others.length > 0) {
        problems.push(`${where}/statement: use :name parameters only (found ${others.join(', ')})`);
        continue;
      }
      let probeStmt: Database.Statement;
      let tables: string[];
      try {
        probeStmt = rw.prepare(sql);
      } catch (err) {
        problems.push(`${where}/statement: statement does not prepare: ${(err as Error).message}`);
        continue;
      }
      try {
        tables = tablesTouched(rw, sql, names, schema);
      } catch (err) {
        problems.push(`${where}/statement: ${(err as Error).message}`);
        continue;
      }
      const writes = t.writes ?? false;
      if (!writes && !probeStmt.readonly) {
        problems.push(`${where}/statement: the statement writes; set writes: true`);
        continue;
      }
      if (!writes) {
        try {
          ro.prepare(sql); // a read must prepare on the read-only connection too
        } catch (err) {
          problems.push(`${where}/statement: statement does not prepare on a read-only connection: ${(err as Error).message}`);
          continue;
        }
      }
      const userParams = names.filter((p) => p !== 'now');
      const inputSchema = t.input_schema ?? {
        type: 'object',
        properties: Object.fromEntries(userParams.map((p) => [p, { type: ['string', 'number', 'boolean', 'null'] }])),
        required: userParams,
        additionalProperties: false,
      };
      let validate;
      try {
        validate = compileInputSchema(inputSchema);
      } catch (err) {
        problems.push(`${where}/input_schema: does not compile: ${(err as Error).message}`);
        continue;
      }
      const unreachable = t.input_schema ? unreachableParams(t.input_schema, userParams) : [];
      if (unreachable.length > 0) {
        problems.push(
          `${where}/input_schema: the statement's ${unreachable.map((p) => `:${p}`).join(', ')} ${unreachable.length === 1 ? 'is not a property' : 'are not properties'} of the input schema, which allows no other (additionalProperties: false), so ${unreachable.length === 1 ? 'it' : 'they'} would always bind NULL; add ${unreachable.length === 1 ? 'it' : 'them'} to properties or rename the parameter`,
        );
        continue;
      }
      const reader = probeStmt.reader;
      const mode: StatementMode = !reader ? 'run' : writes ? 'returning' : 'select';
      const defaultContract: Record<string, ContractType> = reader && !writes ? { rows: 'list' } : reader ? {} : { changes: 'number' };
      this.list.set(op, {
        operation: op,
        params: names,
        tables,
        broken: null,
        sql,
        writes,
        mode,
        validate,
        descriptor: descriptor({
          id: `${this.name}.${op}`,
          connector: this.name,
          description: t.description ?? '',
          writes,
          input_schema: inputSchema,
          scope_derivation: 'table',
          contract: t.contract ?? { required: defaultContract },
          data_classes: t.data_classes ?? {},
        }),
      });
    }
    if (problems.length > 0) throw new ConnectorSetupError(problems);
  }

  tools(): ConnectorTool[] {
    return [...this.list.values()];
  }

  async deriveScopes(operation: string): Promise<string[]> {
    const tool = this.list.get(operation);
    if (tool && tool.tables === null) {
      this.lookAgainWhileBroken();
      if (tool.tables === null) throw new DeterministicFailure(this.noLongerPrepares(tool));
    }
    return (tool?.tables ?? []).map((t) => `sql:table:${t}`);
  }

  /**
   * A tool whose statement no longer prepares is looked at again while it stays broken, so a
   * fixed schema serves without a restart: at most once a second (a look runs on svcd's
   * thread, up to REFIND_BUSY_MS under a migration's lock), refused from what was found in
   * between. A call's scopes (deriveScopes) and a canary's probe (call without derived
   * scopes) both look, so a probe after the repair passes and can lead to a release.
   */
  private lookAgainWhileBroken(): void {
    const now = performance.now();
    if (now - this.lastBrokenLook < BROKEN_LOOK_EVERY_MS) return;
    this.lastBrokenLook = now;
    try {
      this.refindTables();
    } catch {
      /* the file cannot be read now: refused as it was */
    }
  }

  /** What a call of a tool whose statement no longer prepares is refused with: SQLite's reason, and what to do. */
  private noLongerPrepares(tool: SqliteTool): string {
    const why = tool.broken === null ? '' : `: ${tool.broken}`;
    return `statement ${tool.operation} no longer prepares on ${this.cfg.path} (its schema changed${why}); fix the schema (calls and probes look at it again, no restart needed), or change the statement in the gateway config and restart svcd`;
  }

  /**
   * The file's schema changed (decisions §9 finds a statement's tables once at load; a view
   * or trigger redefined since can lead it to other tables): every tool's tables are found
   * again, and the host checks later calls against the new schema. Synchronous, as the load
   * checks are: a few EXPLAINs, once per change.
   */
  private refindTables(): void {
    // svcd's own thread: a writer holding the file waits it only this long (the call is then
    // refused, and a retry finds the tables).
    const db = new Database(this.cfg.path, { fileMustExist: true, readonly: true, timeout: REFIND_BUSY_MS });
    try {
      db.exec('BEGIN'); // one snapshot: the version and the tables of one schema
      const version = Number(db.pragma('schema_version', { simple: true }));
      const schema = schemaMap(db);
      for (const tool of this.list.values()) {
        try {
          tool.tables = tablesTouched(db, tool.sql, tool.params, schema);
          tool.broken = null;
        } catch (err) {
          tool.tables = null; // refused by deriveScopes and call (noLongerPrepares), naming `broken`
          tool.broken = (err as Error).message;
        }
      }
      this.schemaVersion = version;
      db.exec('COMMIT');
    } finally {
      db.close();
    }
  }

  async call(operation: string, args: Record<string, unknown>, ctx: CallContext): Promise<unknown> {
    const tool = this.list.get(operation);
    if (!tool) throw new RefusedBeforeAsking(`no statement ${operation}`);
    const binds: Record<string, unknown> = {};
    for (const p of tool.params) {
      if (p === 'now') {
        binds.now = isoTime(ctx.now());
        continue;
      }
      const v = args[p];
      if (v === undefined || v === null) binds[p] = null;
      else if (typeof v === 'boolean') binds[p] = v ? 1 : 0;
      else if (typeof v === 'string' || typeof v === 'number') binds[p] = v;
      else throw new ArgsInvalid(`parameter ${p} must be a string, number, boolean or null`, `/${pointerToken(p)}`);
    }
    // The tables the call's scopes were granted for; a canary's probe, which no remit
    // governs, takes the tool's as they are found.
    const granted = ctx.derivedScopes ? ctx.derivedScopes.map((sc) => sc.slice('sql:table:'.length)) : null;
    for (let attempt = 1; ; attempt++) {
      // A probe takes the tool as it is now: one that stopped preparing is looked at again
      // (once a second), so the probe after a repair passes rather than failing for good.
      if (tool.tables === null && granted === null) this.lookAgainWhileBroken();
      if (tool.tables === null) {
        throw new NotAttempted(`connector ${this.name}: ${this.noLongerPrepares(tool)}; the call was not run`);
      }
      const checkedFor = granted ?? tool.tables;
      if (!sameTables(checkedFor, tool.tables)) {
        // Found again since the call's scopes were checked.
        throw new NotAttempted(`connector ${this.name}: the schema of ${this.cfg.path} changed: ${operation} now touches tables [${tool.tables.join(', ')}], not the [${checkedFor.join(', ')}] its scopes were granted for; the call was not run, and a retry is checked against the new tables`);
      }
      if (!this.host) throw new UpstreamError(`connector ${this.name} is not running`);
      try {
        // The version goes with the call, checked in the statement's own transaction: a call
        // still queued when another found the tables again is checked against its own.
        return await this.host.run(operation, binds, ctx.signal, () => ctx.outcomeUnknown(), this.schemaVersion);
      } catch (err) {
        if (!(err instanceof StatementFailureError)) throw err;
        if (err.failure.kind === 'schema_changed' && attempt === 1) {
          // Refused before it ran: with the tables found again, it runs if it touches the
          // ones its scopes were granted for.
          try {
            // Once per change: calls queued behind the first to meet it find it done.
            if (err.failure.schemaVersion !== this.schemaVersion) this.refindTables();
          } catch (refindErr) {
            throw new NotAttempted(`connector ${this.name}: the schema of ${this.cfg.path} changed and its tables cannot be found again yet (${(refindErr as Error).message}); the call was not run`);
          }
          continue;
        }
        throw classifyFailure(err.failure, DETERMINISTIC_CODES, this.name, this.cfg.path, MAX_RESULT_BYTES);
      }
    }
  }

  async close(): Promise<void> {
    const host = this.host;
    this.host = null;
    await host?.close();
  }
}

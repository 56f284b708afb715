/**
 * The MCP servers a gateway has running, written down in its data directory so that the next
 * gateway on that directory can end the ones a crash left behind. A server is the leader of
 * its own process group (mcp-transport.ts) and is ended with it on every orderly stop; a
 * SIGKILL of svcd ends nothing, and a server that ignores the end of its stdin would live on,
 * holding the credentials of its `env`, one more after every crash of a crash loop.
 *
 * A pid alone is not proof: after a reboot or enough time it names another process. An entry
 * records the leader's start time (field 22 of /proc/<pid>/stat, clock ticks since boot), and
 * a group is ended only when its leader is still that same process. A leader that ended at
 * the close of its stdin can leave its children running (a browser it drove, a `sleep` of a
 * shell wrapper): each server's processes carry a random mark in `SVC_MCP_GROUP`, recorded
 * with the entry, and every process of this boot still carrying an old entry's mark is ended
 * too. Where /proc does not exist nothing is recorded and nothing is ended.
 *
 * The servers of a gateway that still runs (a copy of its data directory) are left alone, but
 * their record is kept, under `others`, until a start finds that gateway gone: otherwise the
 * first start would forget them and none after it could end them.
 */
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../log/logger.js';
import { writeFileDurably } from '../../util/durable-file.js';
import { GROUP_MARK_VARIABLE, isOwnGroup } from './mcp-process-groups.js';

const GROUPS_FILE = 'mcp-groups.json';
/** The record's own entry: the gateway process that wrote it (pid keys are the servers). */
const GATEWAY_KEY = 'gateway';
/** The records of other gateways that still ran when this one started (never read by older versions). */
const OTHERS_KEY = 'others';

interface Owner {
  pid: number;
  start: string;
  boot: string | null;
}

interface Entry {
  /** The leader's start time, from /proc/<pid>/stat (clock ticks since boot). */
  start: string;
  /** The boot it started in: start times repeat across reboots. */
  boot: string | null;
  connector: string;
  /** The `SVC_MCP_GROUP` value its processes inherit (entries of older versions have none). */
  mark?: string;
}

/** The servers one gateway started, with that gateway (null: a record of an older version). */
interface GatewayRecord {
  gateway: Owner | null;
  servers: Record<string, Entry>;
}

/** How a record of another gateway is kept in the file. */
interface KeptRecord {
  gateway: Owner;
  servers: Record<string, Entry>;
}

/** This boot's id (Linux), or null; it cannot change while the process runs. */
const BOOT_ID: string | null = (() => {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return null;
  }
})();

/**
 * The fields of /proc/<pid>/stat after `(comm)`, from field 3 (state) on, or null when the
 * process does not exist (or there is no /proc). comm may hold spaces and parentheses, so
 * they are counted from the last ')'.
 */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** The start time of process `pid` (field 22, starttime), or null when it does not exist. */
function processStart(pid: number): string | null {
  return statFields(pid)?.[19] ?? null;
}

/**
 * Whether the gateway `owner` still runs: the same process (its start time), in this boot,
 * and not a zombie (Z) or dead (X; x before Linux 3.14). A SIGKILLed gateway its parent has
 * not reaped yet is a zombie with its old start time, and its servers are orphans already.
 */
function stillRuns(owner: Owner): boolean {
  if (owner.pid === process.pid || owner.boot !== BOOT_ID) return false; // the pid of an earlier life of ours, or of another boot
  const fields = statFields(owner.pid);
  return fields !== null && fields[19] === owner.start && !['Z', 'X', 'x'].includes(fields[0] ?? '');
}

/** An owner as the file holds it, or null when it is not one. */
function ownerOf(value: unknown): Owner | null {
  const o = value as Partial<Owner> | null;
  return o && typeof o === 'object' && typeof o.pid === 'number' && typeof o.start === 'string' ? { pid: o.pid, start: o.start, boot: typeof o.boot === 'string' ? o.boot : null } : null;
}

/** The file's own record and the kept records of other gateways, in the order found. */
function recordsOf(file: unknown): GatewayRecord[] {
  if (!file || typeof file !== 'object') return [];
  const { [GATEWAY_KEY]: gateway, [OTHERS_KEY]: others, ...servers } = file as Record<string, unknown>;
  const out: GatewayRecord[] = [{ gateway: ownerOf(gateway), servers: servers as Record<string, Entry> }];
  for (const kept of Array.isArray(others) ? (others as unknown[]) : []) {
    const owner = ownerOf((kept as Partial<KeptRecord> | null)?.gateway);
    const keptServers = (kept as Partial<KeptRecord>).servers;
    if (owner && keptServers && typeof keptServers === 'object') out.push({ gateway: owner, servers: keptServers });
  }
  return out;
}

/** `pid`'s parent and process group (fields 4 and 5), or null when it does not exist. */
function parentAndGroup(pid: number): { ppid: number; pgid: number } | null {
  const fields = statFields(pid);
  return fields ? { ppid: Number(fields[1]), pgid: Number(fields[2]) } : null;
}

/** This process and the processes that started it, up to init. */
function selfAndAncestors(): Set<number> {
  const out = new Set<number>();
  for (let pid = process.pid; pid > 1 && !out.has(pid); pid = parentAndGroup(pid)?.ppid ?? 0) out.add(pid);
  return out;
}

/** Pids of this boot's processes (of any user: only our own, or all as root, can be read further), or none without /proc. */
function allPids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .map(Number);
  } catch {
    return [];
  }
}

/** The `SVC_MCP_GROUP` value in process `pid`'s environment, or null. */
function markOf(pid: number): string | null {
  let environ: string;
  try {
    environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return null; // gone, or not ours to read
  }
  const prefix = `${GROUP_MARK_VARIABLE}=`;
  const entry = environ.split('\0').find((v) => v.startsWith(prefix));
  return entry === undefined ? null : entry.slice(prefix.length);
}

export class McpGroups {
  private static readonly open = new Map<string, McpGroups>();
  private readonly path: string;
  private entries: Record<string, Entry> = {};
  /** The records of gateways that still ran at the first opening, kept for a later start to end. */
  private others: KeptRecord[] = [];
  /** This process, as every save records it (null without /proc). */
  private readonly owner: Owner | null;

  private constructor(dataDir: string) {
    this.path = join(dataDir, GROUPS_FILE);
    const start = processStart(process.pid);
    this.owner = start === null ? null : { pid: process.pid, start, boot: BOOT_ID };
  }

  /**
   * The record of `dataDir`, shared by every gateway this process opens there. The first
   * opening ends what a previous process left (call it with the directory's lock held).
   */
  static forDir(dataDir: string, logger: Logger): McpGroups {
    const key = realpathSync(dataDir);
    let g = McpGroups.open.get(key);
    if (!g) {
      g = new McpGroups(dataDir);
      g.reapOrphans(logger);
      McpGroups.open.set(key, g);
    }
    return g;
  }

  /**
   * Ends the groups of servers a previous gateway on this directory left running (its leader
   * still the process recorded), then forgets their entries; the records of gateways that
   * still run are kept, their servers left alone. Call once the directory's lock is held.
   */
  private reapOrphans(logger: Logger): void {
    let old: unknown = {};
    try {
      old = JSON.parse(readFileSync(this.path, 'utf8'));
    } catch {
      /* no file, or unreadable: nothing to reap */
    }
    const orphaned: Array<Record<string, Entry>> = [];
    for (const record of recordsOf(old)) {
      const owner = record.gateway;
      if (owner && stillRuns(owner)) {
        // A copy of a running gateway's data directory, not a crash: its servers are not ours.
        logger.warn('the MCP servers recorded in this data directory belong to a gateway that still runs; leaving them alone (a copied data directory?)', { pid: owner.pid });
        const same = this.others.find((k) => k.gateway.pid === owner.pid && k.gateway.start === owner.start && k.gateway.boot === owner.boot);
        if (same) Object.assign(same.servers, record.servers);
        else this.others.push({ gateway: owner, servers: { ...record.servers } });
      } else {
        orphaned.push(record.servers);
      }
    }
    const ownMark = process.env[GROUP_MARK_VARIABLE]; // started from an old server's tool: that one is our ancestor
    const marks = new Map<string, string>(); // mark → connector, of this boot's old servers
    for (const [pidText, e] of orphaned.flatMap((servers) => Object.entries(servers))) {
      const pid = Number(pidText);
      if (!Number.isInteger(pid) || pid <= 1 || typeof e?.start !== 'string') continue;
      if (e.boot !== BOOT_ID) continue; // a reboot ended them all
      if (isOwnGroup(pid)) continue; // never this process's own servers
      if (typeof e.mark === 'string' && e.mark !== '' && e.mark !== ownMark) marks.set(e.mark, e.connector);
      if (processStart(pid) !== e.start) continue; // gone, or the pid is someone else's now
      try {
        process.kill(-pid, 'SIGKILL');
        logger.warn('ended an MCP server left running by a gateway that did not stop', { connector: e.connector, pid });
      } catch {
        /* ended meanwhile */
      }
    }
    // What a server left behind when it ended without its gateway: marked, and never ours now.
    if (marks.size > 0) {
      const spared = selfAndAncestors();
      for (const pid of allPids()) {
        const mark = spared.has(pid) ? null : markOf(pid);
        const connector = mark === null ? undefined : marks.get(mark);
        if (connector === undefined) continue;
        if (isOwnGroup(parentAndGroup(pid)?.pgid ?? 0)) continue; // in one of our own servers' groups
        try {
          process.kill(pid, 'SIGKILL');
          logger.warn('ended a process an MCP server left running when its gateway did not stop', { connector, pid });
        } catch {
          /* ended meanwhile */
        }
      }
    }
    this.entries = {};
    this.save();
  }

  /** Records a server that just started. */
  add(pid: number, connector: string, mark?: string): void {
    const start = processStart(pid);
    if (start === null) return;
    this.entries[String(pid)] = { start, boot: BOOT_ID, connector, ...(mark ? { mark } : {}) };
    this.save();
  }

  /** Forgets a server whose group has been ended. */
  remove(pid: number): void {
    if (!(String(pid) in this.entries)) return;
    delete this.entries[String(pid)];
    this.save();
  }

  private save(): void {
    try {
      const record = { ...this.entries, ...(this.owner ? { [GATEWAY_KEY]: this.owner } : {}), ...(this.others.length > 0 ? { [OTHERS_KEY]: this.others } : {}) };
      writeFileDurably(this.path, JSON.stringify(record) + '\n', 0o600);
    } catch {
      /* best effort: an unwritable record only loses the clean-up after a crash */
    }
  }
}

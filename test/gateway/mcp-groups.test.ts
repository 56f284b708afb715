/**
 * The orphan record of MCP servers (src/gateway/connectors/mcp-groups.ts; svc-gateway(5),
 * CONNECTORS, mcp: "a gateway killed outright … the next gateway on the directory ends the
 * groups"), with real processes: a SIGKILLed gateway its parent has not reaped (a zombie)
 * is gone, and the record of a gateway that still runs outlives the start that spared it.
 * Linux only (/proc); every process started here is killed after each test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { McpGroups } from '../../src/gateway/connectors/mcp-groups.js';
import { Redactor } from '../../src/log/logger.js';
import { tempDir } from '../helpers/daemon.js';
import { capturedLogger } from './helpers.js';

const dir = tempDir('svc-mcp-groups-');
const BOOT = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Fields of /proc/<pid>/stat from field 3 (state) on; comm may hold ") ", so after the last ')'. */
function statOf(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}
const startOf = (pid: number) => statOf(pid)[19]!;

/** A child of this process, killed after the test; resolves once it runs. */
async function start(command: string, args: string[], env: Record<string, string> = {}): Promise<ChildProcess> {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'ignore'], detached: true });
  started.push(child);
  await new Promise((resolve, reject) => child.once('spawn', resolve).once('error', reject));
  return child;
}

/** Whether `child` ended (and was reaped by this process) within `ms`. */
async function ends(child: ChildProcess, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (child.exitCode === null && child.signalCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return child.exitCode !== null || child.signalCode !== null;
}

/** A server as a gateway records it, and a process it left behind carrying its mark. */
async function markedServer(): Promise<{ mark: string; leader: ChildProcess; stray: ChildProcess; entry: Record<string, unknown> }> {
  const mark = randomUUID();
  const leader = await start('sleep', ['31'], { SVC_MCP_GROUP: mark }); // leads its own group, as a server does
  const stray = await start('sleep', ['32'], { SVC_MCP_GROUP: mark }); // recorded by nothing but its mark
  return { mark, leader, stray, entry: { [leader.pid!]: { start: startOf(leader.pid!), boot: BOOT, connector: 'left', mark } } };
}

function openDir(name: string, record: unknown): { dataDir: string; text: () => string } {
  const dataDir = join(dir, name);
  mkdirSync(dataDir, { recursive: true });
  if (record !== undefined) writeFileSync(join(dataDir, 'mcp-groups.json'), JSON.stringify(record));
  const log = capturedLogger(new Redactor());
  McpGroups.forDir(dataDir, log.logger);
  return { dataDir, text: log.text };
}

const fileOf = (dataDir: string) => JSON.parse(readFileSync(join(dataDir, 'mcp-groups.json'), 'utf8'));

describe('svc-gateway(5) CONNECTORS, mcp: the next gateway on the directory ends what a SIGKILLed one left (mcp-groups.ts)', () => {
  it('svc-gateway(5) CONNECTORS, mcp: a SIGKILLed gateway not yet reaped (a zombie) is gone, and its servers are ended', async () => {
    // The shell's background child exits once the shell has become `sleep`, which never reaps
    // it. (A child that exits at once, `true`, may be reaped by the shell before its exec: a
    // fresh clone's suite under load found it gone.)
    const parent = await start('sh', ['-c', 'sleep 0.5 & echo $!; exec sleep 30']);
    const zombie = await new Promise<number>((resolve) => parent.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))));
    const deadline = Date.now() + 3000;
    while (statOf(zombie)[0] !== 'Z' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(statOf(zombie)[0]).toBe('Z');
    const { leader, stray, entry } = await markedServer();

    const { dataDir, text } = openDir('zombie', { ...entry, gateway: { pid: zombie, start: startOf(zombie), boot: BOOT } });
    expect(text()).not.toContain('still runs');
    expect(await ends(leader)).toBe(true);
    expect(await ends(stray)).toBe(true);
    expect(text()).toContain('ended a process an MCP server left running');
    const file = fileOf(dataDir);
    expect(file.gateway.pid).toBe(process.pid);
    expect(file.others).toBeUndefined(); // nothing of the zombie's is kept
    expect(Object.keys(file)).toEqual(['gateway']);
  });

  it('svc-gateway(5) CONNECTORS, mcp: the servers of a gateway that still runs are left alone but stay recorded, and a later start ends them once it is gone', async () => {
    // Its comm, "x) Z (y", reads as a zombie to a parse that stops at the first ')'.
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    symlinkSync('/usr/bin/sleep', join(bin, 'x) Z (y'));
    const owner = await start(join(bin, 'x) Z (y'), ['33']);
    expect(readFileSync(`/proc/${owner.pid}/comm`, 'utf8').trim()).toBe('x) Z (y');
    const { leader, stray, entry } = await markedServer();
    const gateway = { pid: owner.pid!, start: startOf(owner.pid!), boot: BOOT };

    const first = openDir('copied', { ...entry, gateway });
    expect(first.text()).toContain(`belong to a gateway that still runs; leaving them alone (a copied data directory?)","pid":${owner.pid}`);
    expect(await ends(leader, 300)).toBe(false);
    expect(await ends(stray, 0)).toBe(false);
    const file = fileOf(first.dataDir);
    expect(file.gateway.pid).toBe(process.pid);
    expect(file.others).toEqual([{ gateway, servers: entry }]); // merged in, with its owner

    // Once that gateway is gone, the next start on the directory (a copy of it here: this
    // process opens a directory once) ends its servers.
    owner.kill('SIGKILL');
    expect(await ends(owner)).toBe(true);
    const later = join(dir, 'copied-later');
    mkdirSync(later);
    copyFileSync(join(first.dataDir, 'mcp-groups.json'), join(later, 'mcp-groups.json'));
    const second = openDir('copied-later', undefined);
    expect(await ends(leader)).toBe(true);
    expect(await ends(stray)).toBe(true);
    expect(second.text()).not.toContain('still runs');
    expect(fileOf(second.dataDir).others).toBeUndefined();
  });
});

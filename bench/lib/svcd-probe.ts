/**
 * What svcd spent during a measured phase, read from outside so the numbers come from the
 * run being measured: CPU from /proc (the whole process, and the main thread alone, which is
 * the event loop) and group commit from svcd's own metrics (how long durable commits waited
 * for their fsync, and how many transactions an fsync covered). Linux only: elsewhere the
 * CPU figures are null and their rows are left out.
 */
import { readFileSync } from 'node:fs';
import { httpJson } from './http.js';

export interface SvcdSample {
  at: number;
  /** CPU ms of the whole process (all threads), or null without /proc. */
  cpuMs: number | null;
  /** The part of cpuMs spent in the OS kernel on svcd's behalf (system calls: fsync, I/O, locks). */
  sysCpuMs: number | null;
  /** CPU ms of the main thread (the event loop), or null without /proc. */
  loopCpuMs: number | null;
  syncWaitSeconds: number;
  durableCommits: number;
  fsyncs: number;
  fsyncTransactions: number;
}

export interface SvcdPhase {
  /** CPU ms per cycle, all threads. */
  cpuMsPerCycle: number | null;
  /** The part of cpuMsPerCycle spent in the OS kernel (system time). */
  sysCpuMsPerCycle: number | null;
  /** Share of the wall time the event loop was on the CPU, in %. */
  loopBusyPercent: number | null;
  /** Mean wait of a durable commit for its fsync, ms. */
  syncWaitMs: number;
  /** Transactions per fsync. */
  transactionsPerFsync: number;
}

/** utime and stime of /proc/PID[/task/TID]/stat in ms (USER_HZ is 100 on Linux). */
function procCpuMs(path: string): { user: number; sys: number } | null {
  try {
    const text = readFileSync(path, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' '); // the name may hold ') '
    return { user: Number(fields[11]) * 10, sys: Number(fields[12]) * 10 };
  } catch {
    return null;
  }
}

function metric(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

export async function sampleSvcd(pid: number, kernelUrl: string): Promise<SvcdSample> {
  // Clock and CPU first: the metrics request below is not part of the measured phase.
  const at = performance.now();
  const cpu = procCpuMs(`/proc/${pid}/stat`);
  const loop = procCpuMs(`/proc/${pid}/task/${pid}/stat`);
  const res = await httpJson('GET', `${kernelUrl}/metrics`);
  const text = typeof res.body === 'string' ? res.body : '';
  return {
    at,
    cpuMs: cpu && cpu.user + cpu.sys,
    sysCpuMs: cpu && cpu.sys,
    loopCpuMs: loop && loop.user + loop.sys,
    syncWaitSeconds: metric(text, 'svc_store_commit_sync_seconds_sum'),
    durableCommits: metric(text, 'svc_store_commit_sync_seconds_count'),
    fsyncs: metric(text, 'svc_store_fsyncs_total'),
    fsyncTransactions: metric(text, 'svc_store_fsync_transactions_total'),
  };
}

export function phase(from: SvcdSample, to: SvcdSample, cycles: number): SvcdPhase {
  const wall = to.at - from.at;
  const diff = (a: number | null, b: number | null) => (a === null || b === null ? null : b - a);
  const cpu = diff(from.cpuMs, to.cpuMs);
  const sys = diff(from.sysCpuMs, to.sysCpuMs);
  const loop = diff(from.loopCpuMs, to.loopCpuMs);
  const commits = to.durableCommits - from.durableCommits;
  const fsyncs = to.fsyncs - from.fsyncs;
  return {
    cpuMsPerCycle: cpu === null ? null : cpu / cycles,
    sysCpuMsPerCycle: sys === null ? null : sys / cycles,
    loopBusyPercent: loop === null ? null : (loop / wall) * 100,
    syncWaitMs: commits > 0 ? ((to.syncWaitSeconds - from.syncWaitSeconds) * 1000) / commits : 0,
    transactionsPerFsync: fsyncs > 0 ? (to.fsyncTransactions - from.fsyncTransactions) / fsyncs : 0,
  };
}

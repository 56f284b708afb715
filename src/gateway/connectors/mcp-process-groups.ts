/**
 * The process groups of the MCP servers this process started: each server runs in a group of its
 * own, marked by an environment variable, so that a whole group can be signalled and the groups
 * a killed gateway left behind can be recognised (mcp-groups.ts). Apart from mcp-transport.ts,
 * so that reading the record of groups at start loads no MCP SDK: a gateway with no mcp
 * connector does not load it at all (gateway.ts).
 */

export const useGroups = process.platform !== 'win32';

/** The variable that marks every process of one server's life (mcp-transport.ts, onGroupStarted). */
export const GROUP_MARK_VARIABLE = 'SVC_MCP_GROUP';

/** Process groups still alive; killed on process exit so a crashing gateway leaves no servers behind. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;
export function trackGroup(pid: number): void {
  liveGroups.add(pid);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const g of liveGroups) killGroup(g, 'SIGKILL');
    });
  }
}

/** True when `pid` leads a server group this process started and has not ended. */
export function isOwnGroup(pid: number): boolean {
  return liveGroups.has(pid);
}

/** Signals a whole process group (falls back to the single process where groups do not exist). */
export function killGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(useGroups ? -pid : pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Forgets a group that has ended. */
export function untrackGroup(pid: number): void {
  liveGroups.delete(pid);
}

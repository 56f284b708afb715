/**
 * `svc approvals`: the approver's commands (interface 2.8, 4.1; decisions 5.4).
 *   svc approvals                        the inbox TUI for the actor's role (a terminal only)
 *   svc approvals list [--state S] [--approver role:R] [--limit N]
 *   svc approvals approve ID [--reason R]
 *   svc approvals reject ID --reason R
 * Each action is a testable function returning data; `registerApprovals` wires them to argv.
 */
import type { Command } from 'commander';
import { Option } from 'commander';
import { ApiError, ApprovalsApi, approverOf, LIST_ALL_CAP, REASON_MAX_LENGTH, type Actor, type Approval, type ApprovalDecision, type ApprovalState } from '../tui/approvals-api.js';
import { CliError, EXIT, usageError } from '../exit.js';
import { errorFromBody, TransportError, unreachable } from '../http-client.js';
import { parseListLimit } from '../list-limit.js';
import { actorOf, globals, kernelClient, kernelUrlOf, output, table, timeoutMsOf } from '../context.js';
import { expiredRemitNote } from './run.js';
import { clean } from '../terminal-text.js';
import { inboxEnv } from '../tui/inbox-env.js';
import { closestName } from '../../src/util/did-you-mean.js';

/** `--state` values: an approval state, or `all` for no state filter. */
export const LIST_STATES = ['pending', 'approved', 'rejected', 'cancelled', 'all'] as const;

function apiOf(cmd: Command): ApprovalsApi {
  const g = globals(cmd);
  // --timeout 0 (no limit) as a day: the approvals client always keeps a limit of its own.
  return new ApprovalsApi({ baseUrl: kernelUrlOf(cmd), token: g.token, timeoutMs: timeoutMsOf(cmd) ?? 86_400_000 });
}

/** Maps the approvals client's failures to the CLI's exit codes (cli/exit.ts). */
export function toCliError(err: unknown): unknown {
  if (err instanceof TransportError) return unreachable(err);
  if (err instanceof ApiError) return errorFromBody(err.status, err.body, err.baseUrl);
  return err;
}

/** `svc approvals list`: every page, newest first. */
export async function handleList(api: ApprovalsApi, q: { state: (typeof LIST_STATES)[number]; approver?: string; limit?: number }): Promise<Approval[]> {
  const state: ApprovalState | undefined = q.state === 'all' ? undefined : q.state;
  return api.listAll({ state, approver: q.approver }, q.limit);
}

/** One decision; a lost race (409 already_decided) is reported with who decided and how. */
export async function handleDecide(
  api: ApprovalsApi,
  id: string,
  decision: ApprovalDecision,
  actor: Actor,
  reason: string,
): Promise<{ approval_id: string; decision: ApprovalDecision; run_id: string; run_state: string }> {
  try {
    const res = await api.decide(id, decision, actor, reason);
    return { approval_id: id, decision, run_id: res.run_id, run_state: res.run_state };
  } catch (err) {
    if (err instanceof ApiError && (err.code === 'already_decided' || (err.code === 'invalid_state' && err.details.state === 'cancelled'))) {
      const current = await api.get(id).catch(() => null);
      const runState = typeof err.details.run_state === 'string' ? err.details.run_state : null;
      throw new CliError(describeDecided(id, current, runState), EXIT.failed, err.body);
    }
    if (err instanceof ApiError && err.code === 'not_the_approver') {
      throw new CliError(`not_the_approver: ${actor.id} (role:${actor.role}) may not decide ${id}: ${err.message}`, EXIT.failed, err.body);
    }
    throw toCliError(err);
  }
}

/**
 * "apr_x was already rejected by fin-2 (role:finance) at …: reason", or for a cancelled one
 * "apr_x was cancelled when its run run_y ended (completed)" (the kernel's details.run_state).
 */
export function describeDecided(id: string, current: Approval | null, runState: string | null = null): string {
  if (!current) return `already_decided: ${id} was already decided`;
  if (current.state === 'cancelled') return `invalid_state: ${id} was cancelled when its run ${current.run_id} ended${runState ? ` (${runState})` : ''} before anyone decided`;
  const what = current.decision ?? current.state;
  const who = current.actor ? ` by ${current.actor.id} (role:${current.actor.role})` : '';
  const when = current.decided_at ? ` at ${current.decided_at}` : '';
  const why = current.reason ? `: ${current.reason}` : '';
  return clean(`already_decided: ${id} was already ${what}${who}${when}${why}`);
}

function listTable(list: Approval[]): string {
  if (list.length === 0) return 'no approvals';
  return table(
    ['APPROVAL', 'CREATED', 'STATE', 'APPROVER', 'TOOL', 'RUN', 'RULE'],
    // A condition that failed closed is said next to the rule: the approval may exist because
    // the policy could not read the action (the inbox shows the messages).
    list.map((a) => [a.approval_id, a.created_at, a.state, a.approver, a.action?.tool, a.run_id, a.errors?.length ? `${a.rule} (failed closed)` : a.rule]),
  );
}

/** svcd takes reasons of REASON_MAX_LENGTH characters (code points, as its schema counts): longer is a usage error here, not the server's refusal. */
function parseReason(v: string): string {
  const n = [...v].length;
  if (n > REASON_MAX_LENGTH) throw usageError(`--reason is ${n} characters; svcd takes at most ${REASON_MAX_LENGTH}`);
  return v;
}

function parseApprover(v: string): string {
  if (!/^role:[^\s:]+$/.test(v)) throw usageError(`--approver must be role:ROLE, got "${v}"`);
  return v;
}

function run<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      throw toCliError(err);
    }
  };
}

export function registerApprovals(program: Command): void {
  const approvals = program
    .command('approvals')
    .description('the approvals inbox (a terminal UI for --actor\'s role) and approval decisions')
    // The group has its own action (the inbox), so commander adds no `help` subcommand by itself.
    .helpCommand(true)
    .addHelpText(
      'after',
      '\nWith no subcommand, on a terminal, opens the inbox of pending approvals for --actor\'s role:\n' +
        '  ↑/↓ or j/k move, a approve, r reject (a reason is required), / filter, q quit.\n' +
        'See svc-approvals(1).',
    )
    // Words after `approvals` that name no subcommand land here: say which word, not "too many arguments".
    .argument('[words...]')
    .usage('[options] [command]')
    .action(
      run(async (words: string[], _opts: unknown, cmd: Command) => {
        if (words.length > 0) {
          const known = approvals.commands.map((c) => c.name());
          const near = closestName(words[0]!, known, 1);
          throw usageError(`unknown approvals command "${words[0]}"${near ? ` (did you mean ${near}?)` : ''}; the commands are ${known.join(', ')}`);
        }
        const actor = actorOf(cmd, { approver: true });
        // --json asks for output a program reads; the inbox is a screen for a person.
        if (globals(cmd).json) throw usageError('the inbox has no --json form; use "svc --json approvals list"');
        if (!process.stdout.isTTY || !process.stdin.isTTY) {
          throw usageError('the inbox needs a terminal; use "svc approvals list", "approve ID" or "reject ID --reason R"');
        }
        const g = globals(cmd);
        // Live frames (not Ink's "CI" mode) and React's production build: see inbox-env.ts.
        inboxEnv();
        timeoutMsOf(cmd); // checked like every command's, though the inbox keeps its own 10 s a request
        const { openInbox } = await import('../tui/open-inbox.js');
        await openInbox({ kernelUrl: kernelUrlOf(cmd), token: g.token, actor });
      }),
    );

  approvals
    .command('list')
    .description('list approvals, newest first (default: pending ones for --actor\'s role, if given)')
    .addOption(new Option('--state <state>', 'approval state').choices(LIST_STATES).default('pending'))
    .option('--approver <role:R>', "approver filter (default: role:<actor's role> when --actor or SVC_ACTOR is set)", parseApprover)
    .option('--limit <n>', 'at most this many, 1 to 10000 (default: 1000)', parseListLimit)
    .action(
      run(async (opts: { state: (typeof LIST_STATES)[number]; approver?: string; limit?: number }, cmd: Command) => {
        const g = globals(cmd);
        const approver = opts.approver ?? (g.actor ? approverOf(actorOf(cmd, { approver: true }).role) : undefined);
        // One more than shown, so a cut list can say so (on standard error; stdout stays the list).
        const limit = opts.limit ?? LIST_ALL_CAP;
        const fetched = await handleList(apiOf(cmd), { state: opts.state, approver, limit: limit + 1 });
        const list = fetched.slice(0, limit);
        output(cmd, list, listTable);
        if (fetched.length > limit) process.stderr.write(`svc: showing the newest ${limit}; there are more (raise --limit, up to 10000)\n`);
      }),
    );

  approvals
    .command('approve')
    .description('approve a pending approval as --actor')
    .argument('<id>', 'approval id (apr_…), as svc approvals list shows it')
    .option('--reason <text>', `why, recorded with the decision (optional, at most ${REASON_MAX_LENGTH} characters)`, parseReason)
    .addHelpText('after', '\nExample:\n  svc approvals approve apr_01J… --actor fin-1:finance --reason "duplicate charge"')
    .action(
      run(async (id: string, opts: { reason?: string }, cmd: Command) => {
        const res = await handleDecide(apiOf(cmd), id, 'approved', actorOf(cmd, { approver: true }), opts.reason ?? '');
        output(cmd, res, (r: typeof res) => `approved ${r.approval_id}; run ${r.run_id} is ${r.run_state}`);
        const note = await expiredRemitNote(kernelClient(cmd), res.run_id);
        if (note) process.stderr.write(`svc: warning: ${note}\n`);
      }),
    );

  approvals
    .command('reject')
    .description('reject a pending approval as --actor; a reason is required')
    .argument('<id>', 'approval id (apr_…), as svc approvals list shows it')
    .requiredOption('--reason <text>', `why, recorded with the decision and seen by the run (required, at most ${REASON_MAX_LENGTH} characters)`, parseReason)
    .action(
      run(async (id: string, opts: { reason: string }, cmd: Command) => {
        if (!opts.reason.trim()) throw usageError('--reason must not be empty');
        const res = await handleDecide(apiOf(cmd), id, 'rejected', actorOf(cmd, { approver: true }), opts.reason);
        output(cmd, res, (r: typeof res) => `rejected ${r.approval_id}; run ${r.run_id} is ${r.run_state}`);
      }),
    );
}

#!/usr/bin/env node
/**
 * svc: the operator and approver CLI. Each command lives in cli/commands/<name>.ts and
 * registers itself; this file holds the global options and the single catch that maps
 * errors to exit codes (cli/exit.ts). The commands whose work needs a heavy library (YAML,
 * JSON Schema, CEL, the worker runtime) are defined in cli/register/<name>.ts and load
 * cli/commands/<name>.ts when they run (docs/design.md, "CLI start-up").
 */
import { isMainModule } from '../src/util/main-module.js';
import { usageLine } from '../src/util/usage-line.js';
import { Command, CommanderError } from 'commander';
import { VERSION } from '../src/version.js';
import { CliError, EXIT } from './exit.js';
import { cleanLines } from './terminal-text.js';
import { registerKeys } from './register/keys.js';
import { registerRemit } from './register/remit.js';
import { registerApprovals } from './commands/approvals.js';
import { registerWorker } from './register/worker.js';
import { registerBundle } from './register/bundle.js';
import { registerPolicy } from './register/policy.js';
import { registerRun } from './commands/run.js';
import { registerGateway } from './commands/gateway.js';

export function buildProgram(): Command {
  const program = new Command('svc')
    .description('svc: run AI agents on real systems without handing them the keys')
    .version(VERSION)
    .option('--kernel-url <url>', 'kernel address (default: SVC_KERNEL_URL or http://127.0.0.1:7401)')
    .option('--gateway-url <url>', 'gateway address (default: SVC_GATEWAY_URL or http://127.0.0.1:7402)')
    .option('--token <token>', 'bearer token (default: SVC_TOKEN)')
    .option('--actor <id:role>', 'who you are, for approvals, abandon, resume and retry-compensations (default: SVC_ACTOR)')
    .option('--json', 'print data as JSON (NDJSON for streams)')
    .option('--timeout <seconds>', 'give up on a request svcd has not answered after this long; 0 waits for ever (default: SVC_TIMEOUT or 60; gateway commands 660)')
    // One line per error, with the prefix every other error has (svc(1) EXIT STATUS); commands
    // made after this inherit it.
    .configureOutput({ outputError: (text, write) => write(usageLine('svc', text)) })
    .addHelpText(
      'after',
      '\nEvery command takes --help. Exit status: 0 ok, 1 refused or failed (by the service, or a\nfile that cannot be read or is not valid), 2 usage error, 3 svcd unreachable.\nManual: man svc once installed with npm install -g (man -l man/svc.1 in the source tree).\n\nExample (svcd running on 127.0.0.1:7401):\n  svc keys show\n  svc run list --state parked',
    )
    .exitOverride()
    // Every command's --help lists --actor, --json, --kernel-url and --token too.
    .configureHelp({ showGlobalOptions: true })
    .hook('preAction', (_program, action) => refuseEmptyArguments(action));
  // Commands register here (each file: cli/commands/<name>.ts, or cli/register/<name>.ts). Subcommands inherit exitOverride.
  registerApprovals(program);
  registerKeys(program);
  registerRemit(program);
  registerWorker(program);
  registerBundle(program);
  registerPolicy(program);
  registerRun(program);
  registerGateway(program);
  return program;
}

/**
 * An empty positional argument is a usage error (2), said as such. `RUN=$(svc run start …)`
 * leaves RUN empty when the start failed, and `svc run show ""` would otherwise ask for
 * /v1/runs/ (the list) and blame the URL, or name "run  not found".
 */
function refuseEmptyArguments(action: Command): void {
  const values = action.processedArgs as unknown[];
  action.registeredArguments.forEach((arg, i) => {
    for (const v of ([] as unknown[]).concat(values[i] ?? [])) {
      if (typeof v === 'string' && v.trim() === '') throw new CliError(`${commandPath(action)}: <${arg.name()}> must not be empty`, EXIT.usage);
    }
  });
}

/** `run show`: the command's words below `svc`. */
function commandPath(cmd: Command): string {
  const words: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) words.unshift(c.name());
  return words.join(' ');
}

/**
 * `svc help run start` as `svc run start --help`: commander's help command reads one word, so
 * it showed `run`'s help, and for a word that is no command the whole program's, unasked.
 */
function helpPath(program: Command, argv: string[]): string[] {
  // Global options may come first (`svc --json help run start`): skip them and their values.
  const takesValue = new Set(program.options.filter((o) => o.required || o.optional).map((o) => o.long));
  let at = 0;
  while (at < argv.length && argv[at]!.startsWith('-')) at += takesValue.has(argv[at]) ? 2 : 1;
  if (argv[at] !== 'help' || argv.length <= at + 1) return argv;
  const words = argv.slice(at + 1).filter((w) => !w.startsWith('-'));
  if (words[0] === 'help') return [...argv.slice(0, at), '--help']; // `svc help help`: the program's help
  let cmd = program;
  for (const w of words) {
    const sub = cmd.commands.find((c) => c.name() === w || c.aliases().includes(w));
    if (!sub) throw new CliError(`unknown command '${[...commandPath(cmd).split(' ').filter(Boolean), w].join(' ')}' (svc --help lists the commands)`, EXIT.usage);
    cmd = sub;
  }
  return [...argv.slice(0, at), ...words, '--help'];
}

export async function runCli(argv: string[]): Promise<number> {
  const program = buildProgram();
  // commander recognises program options anywhere on the line, so the program's -V/--version
  // would swallow a subcommand's own --version (`svc policy push F --name N --version V`).
  // When a subcommand is named, the program's version flag steps aside.
  if (argv.some((a) => program.commands.some((c) => c.name() === a))) {
    const options = program.options as unknown as Array<{ long?: string }>;
    const at = options.findIndex((o) => o.long === '--version');
    if (at >= 0) options.splice(at, 1);
  } else if (argv.includes('--json') && (argv.includes('--version') || argv.includes('-V'))) {
    // Data as JSON, as --json promises everywhere else.
    process.stdout.write(JSON.stringify({ version: VERSION }) + '\n');
    return EXIT.ok;
  }
  try {
    argv = helpPath(program, argv);
    await program.parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 || err.code === 'commander.helpDisplayed' || err.code === 'commander.version' ? EXIT.ok : EXIT.usage;
    }
    if (err instanceof CliError) {
      if (program.opts().json && err.body !== undefined) process.stdout.write(JSON.stringify(err.body) + '\n');
      process.stderr.write(`svc: ${cleanLines(err.message)}\n`);
      return err.exitCode;
    }
    // Anything else: one line, the stack only when asked for (SVC_LOG_LEVEL=debug).
    const e = err as Error & { code?: unknown };
    if (process.env.SVC_LOG_LEVEL === 'debug') process.stderr.write(`svc: ${cleanLines(e?.stack ?? String(err))}\n`);
    else process.stderr.write(`svc: ${cleanLines(`${typeof e?.code === 'string' ? `${e.code}: ` : ''}${e?.message ?? String(err)}`)} (SVC_LOG_LEVEL=debug prints the stack)\n`);
    return EXIT.failed;
  }
}


/**
 * Resolves once everything written to `stream` so far has been handed to the OS, or the stream
 * can take no more. Writes to a pipe are asynchronous in Node on Linux: process.exit() with
 * output still queued drops it (a pipe holds 64 KiB), so the exit waits for this. An empty write
 * is queued behind the others, and its callback runs when they are done or have failed.
 */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || stream.writableEnded) return Promise.resolve();
  return new Promise((resolve) => void stream.write('', () => resolve()));
}

let exiting: number | undefined;

/** Exits with `code` once stdout and stderr have reached their reader; the first code asked for wins. */
function exitWhenFlushed(code: number): void {
  if (exiting !== undefined) return;
  exiting = code;
  void Promise.all([flushed(process.stdout), flushed(process.stderr)]).then(() => process.exit(code));
}

if (isMainModule(import.meta.url)) {
  // A reader that went away (`svc run events RUN | head`) ends the command quietly, as it
  // ends any Unix filter, instead of an unhandled 'error' event and its stack.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') return exitWhenFlushed(EXIT.ok);
    throw err;
  });
  // Progress and error lines nobody reads any more are lost; the command ends with its own status.
  process.stderr.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
  void runCli(process.argv.slice(2)).then(exitWhenFlushed);
}

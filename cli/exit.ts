/**
 * The one place that maps failures to exit codes (issue 2): 0 ok, 1 refused or failed by
 * the service, 2 usage, 3 daemon unreachable.
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3 } as const;

/** A failure the CLI reports in one line and exits with. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failed,
    /** The service's error body, printed as JSON with --json. */
    readonly body?: unknown,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export function usageError(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

/** A file-system error in words (src/util/fs-reason.ts). */
export { fsReason } from '../src/util/fs-reason.js';

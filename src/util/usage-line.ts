/**
 * A commander usage error as the one line svc(1) and svcd(8) promise: `PREFIX: message (run
 * with --help for usage)`, without commander's own `error: ` and with its "(Did you mean …?)"
 * suggestion kept on the same line.
 */
export function usageLine(prefix: string, commanderText: string): string {
  return `${prefix}: ${commanderText.trim().replace(/^error: /, '').replace(/\s*\n\s*/g, ' ')} (run with --help for usage)\n`;
}

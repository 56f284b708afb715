/**
 * The first part of every remit token (interface 2.1). Apart from ./token.ts, which re-exports
 * it, so that the CLI can tell a token from a remit id without loading the token codec
 * (docs/design.md, "CLI start-up").
 */
export const TOKEN_PREFIX = 'krt1';

/**
 * Options shared by every ajv instance that checks user data against a user's schema (run
 * input, step output, tool arguments).
 *
 * `multipleOf` in binary floating point: 19.99 / 0.01 is 1998.9999999999998, so ajv's exact
 * check refuses 19.99 as a multiple of 0.01 (money-style schemas would turn away valid
 * amounts). With a precision of 6, ajv accepts a quotient within 1e-6 of an integer: the
 * rounding error of a quotient stays under that up to about 4e9 (1234567.89 / 0.01 is off by
 * 1.5e-8), and a value that far off a multiple is no real amount.
 */
export const MULTIPLE_OF_PRECISION = 6;

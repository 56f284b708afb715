/**
 * A text colour, or none when NO_COLOR is set and not empty (no-color.org). Bold, inverse and
 * dim stay: they carry the selected row and what is secondary, and NO_COLOR is about colour.
 */
export function tint(color: string | undefined): string | undefined {
  return (process.env.NO_COLOR ?? '') !== '' ? undefined : color;
}

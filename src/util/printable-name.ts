/**
 * Names that approvals, events and every operator's screen repeat (a requester, an approver, a
 * grant): any script, but no control character (C0, DEL, C1) and no format or separator
 * character (bidirectional controls, zero-width characters, the BOM, a soft hyphen, U+2028/9),
 * which could make one person's id read as another's.
 */
export const PRINTABLE_NAME_PATTERN = '^[^\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]+$';
export const PRINTABLE_NAME = new RegExp(PRINTABLE_NAME_PATTERN, 'u');
export const PRINTABLE_NAME_MESSAGE = 'must not contain control, format (bidirectional or zero-width) or line-separator characters';

/**
 * Text helpers for the inbox: every string that came from the daemon passes through
 * `clean` before it reaches the terminal, so data cannot inject escape sequences.
 */
import { cell, clean, columns, fit, fitEnd, pad, wrap } from '../terminal-text.js';
import type { Approval } from './approvals-api.js';

// The inbox's and the CLI's one sanitizer of daemon text, and the cuts and pads that count
// columns, live beside the CLI's other helpers: `svc` tables pad by the same widths.
export { cell, clean, columns, fit, fitEnd, pad, wrap };

/** Age of an ISO time relative to `now`: `12s`, `5m`, `3h`, `2d`. */
export function age(iso: string | null | undefined, now: number): string {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** `HH:MM:SS` (UTC) of an ISO time, for "decided at". */
export function clock(iso: string | null | undefined): string {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return clean(iso);
  return new Date(t).toISOString().slice(11, 19) + 'Z';
}

/** `1,200` */
export function tokens(n: unknown): string {
  return typeof n === 'number' && Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '?';
}

/** `$0.12` (more digits when the amount is below a cent). */
export function usd(n: unknown): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '$?';
  return n !== 0 && Math.abs(n) < 0.01 ? `$${n.toPrecision(2)}` : `$${n.toFixed(2)}`;
}

/** Pretty-printed JSON lines (control characters are escaped by JSON itself). */
export function prettyLines(value: unknown): string[] {
  if (value === undefined) return ['(none)'];
  let text: string;
  try {
    text = JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    text = clean(String(value));
  }
  return text.split('\n');
}

/**
 * Lays tokens out in reading order, two spaces apart, on at most `maxLines` lines of `width`
 * columns, keeping the LAST tokens when they do not all fit (the newest events matter most).
 */
export function packTail(items: string[], width: number, maxLines: number): string[] {
  const cut = items.map((i) => fit(i, width));
  for (let start = 0; start < cut.length; start++) {
    const lines: string[] = [];
    for (const item of cut.slice(start)) {
      const last = lines[lines.length - 1];
      if (last !== undefined && columns(last) + 2 + columns(item) <= width) lines[lines.length - 1] = `${last}  ${item}`;
      else lines.push(item);
    }
    if (lines.length <= maxLines) return lines;
  }
  return [];
}

/** An approval's action arguments as one line of JSON: what it lets run, whatever its summary says. */
export function argsText(approval: Pick<Approval, 'action'>): string {
  const args = approval.action?.args;
  return args === undefined ? '' : JSON.stringify(args);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Each approval's arguments as one line of JSON for the list, with the members whose values
 * differ among the approvals of the same tool first: a cut line then still tells apart ten
 * refunds that share an amount but not an invoice. (The detail pane shows them in full.)
 * `valuesOnly`, for a column too narrow to show a member's name and its value: the differing
 * values alone, strings unquoted, `T-30 · 180 · inv_1001`.
 */
export function listArgsTexts(approvals: ReadonlyArray<Pick<Approval, 'approval_id' | 'action'>>, opts: { valuesOnly?: boolean } = {}): Map<string, string> {
  const byTool = new Map<string, Array<Record<string, unknown>>>();
  for (const a of approvals) {
    const args = a.action?.args;
    if (!isPlainObject(args)) continue;
    const tool = String(a.action?.tool ?? '');
    const list = byTool.get(tool);
    if (list) list.push(args);
    else byTool.set(tool, [args]);
  }
  const varyingByTool = new Map<string, Set<string>>();
  for (const [tool, list] of byTool) {
    const keys = new Set(list.flatMap((args) => Object.keys(args)));
    varyingByTool.set(tool, new Set([...keys].filter((k) => new Set(list.map((args) => JSON.stringify(args[k]))).size > 1)));
  }
  const out = new Map<string, string>();
  for (const a of approvals) {
    const args = a.action?.args;
    const varying = varyingByTool.get(String(a.action?.tool ?? ''));
    if (!isPlainObject(args) || !varying || varying.size === 0) {
      out.set(a.approval_id, argsText(a));
      continue;
    }
    const keys = Object.keys(args);
    const ordered = [...keys.filter((k) => varying.has(k)), ...keys.filter((k) => !varying.has(k))];
    if (opts.valuesOnly) {
      out.set(a.approval_id, ordered.map((k) => (typeof args[k] === 'string' ? (args[k] as string) : JSON.stringify(args[k]))).join(' · '));
      continue;
    }
    // Written out member by member: an object would put integer-like keys first again.
    out.set(a.approval_id, `{${ordered.map((k) => `${JSON.stringify(k)}:${JSON.stringify(args[k])}`).join(',')}}`);
  }
  return out;
}

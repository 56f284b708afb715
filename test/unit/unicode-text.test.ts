/**
 * Text that is not plain ASCII, through the places a user or an agent supplies a string:
 * a cut that splits an emoji, an approver id that reads as the requester's, a classified name
 * in another script or in decomposed form, a non-ASCII credential echoed as bytes, and C1
 * controls and bidi overrides on the operator's terminal.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { showHuman } from '../../cli/commands/run.js';
import { cleanLines, cleanText, terminalJson } from '../../cli/terminal-text.js';
import { visibleYaml } from '../../cli/commands/bundle.js';
import { parse as parseYaml } from 'yaml';
import { cutText, shortened } from '../../src/encoding/cut-text.js';
import { textProblem } from '../../src/encoding/json-limits.js';
import { notFound } from '../../src/errors.js';
import { registerSecret } from '../../src/gateway/config.js';
import { decodeBody } from '../../src/gateway/connectors/http.js';
import { sameIdentity } from '../../src/kernel/approvals.js';
import { Redactor } from '../../src/log/logger.js';
import { redactValue, scrubbable } from '../../src/worker/data-boundary.js';
import { actionSummary } from '../../src/worker/executors/action.js';
import { runSvc } from '../helpers/cli.js';

const LONE_SURROGATE = /\p{Cs}/u;

describe('cutText: a cut never leaves half a surrogate pair', () => {
  it('cuts before a pair the limit would split, and leaves shorter text alone', () => {
    expect(cutText('ab😀', 3)).toBe('ab');
    expect(cutText('ab😀', 4)).toBe('ab😀');
    expect(cutText('abc', 2)).toBe('ab');
    expect(cutText('😀', 0)).toBe('');
    for (let n = 0; n < 12; n++) expect(cutText('x😀é😀🇩🇪', n)).not.toMatch(LONE_SURROGATE);
  });

  it('svc-worker(1) action summary: cut to 200 characters, never inside an emoji (the approver read `😀�…`)', () => {
    for (let n = 150; n < 200; n++) {
      const s = actionSummary('billing.refund', { r: 'x'.repeat(n) + '😀'.repeat(40) });
      expect(s, String(n)).not.toMatch(LONE_SURROGATE);
      expect(s.endsWith('…')).toBe(true);
      expect(s.length).toBeLessThanOrEqual(200);
    }
  });

  it('D §10 request_invalid: a member named twice, its long name cut in the message and path, holds no lone surrogate', () => {
    const name = 'a'.repeat(63) + '😀';
    const p = textProblem(`{${JSON.stringify(name)}:1,${JSON.stringify(name)}:2}`);
    expect(p?.message).toContain('appears twice in one object');
    expect(p!.message).not.toMatch(LONE_SURROGATE);
    expect(p!.path).not.toMatch(LONE_SURROGATE);
  });

  it('a not_found message quoting a long id of emoji holds no lone surrogate', () => {
    expect(notFound('run', 'a' + '😀'.repeat(200)).message).not.toMatch(LONE_SURROGATE);
  });
});

describe('D 5.4 no self-approval: ids compared as people read them', () => {
  it('a character that shows nothing (CGJ, variation selector, Hangul filler) does not make another person', () => {
    for (const id of ['José\u034f', 'José\ufe0f', '\u3164José', 'Jo\u115fsé', 'Jose\u0301', ' JOSÉ ']) expect(sameIdentity(id, 'José'), JSON.stringify(id)).toBe(true);
    expect(sameIdentity('STRASSE', 'straße')).toBe(true);
    expect(sameIdentity('José', 'Jose')).toBe(false);
    expect(sameIdentity('fin-1', 'fin-2')).toBe(false);
  });
});

describe('I 5.5 data boundary (svc-worker(1)): a classified value in any script is removed wherever it appears', () => {
  const policy = { grants: [], fieldClasses: { customer_name: 'pii' } };
  const seen = (name: string, elsewhere = name) => JSON.stringify(redactValue({ rows: [{ customer_name: name }], message: `ticket from ${elsewhere}: refund please` }, policy).value);

  it('Cyrillic, Arabic, Greek, Chinese and Japanese names as Latin ones are', () => {
    for (const name of ['Dana Smith', 'Иван Петров', 'محمد علي', 'Γιάννης', '王小明', '山田太郎', '김민준', 'José']) {
      const out = seen(name);
      expect(out, name).not.toContain(name);
      expect(out).toContain('ticket from [REDACTED:pii]: refund please');
    }
  });

  it('composed and decomposed spellings of a name are one name (NFC in the database, NFD in the ticket and back)', () => {
    for (const [stored, written] of [['Zoë Müller', 'Zoë Müller'.normalize('NFD')], ['Zoë Müller'.normalize('NFD'), 'Zoë Müller']]) {
      expect(seen(stored!, written!)).toContain('ticket from [REDACTED:pii]: refund please');
    }
  });

  it('still too short to scrub everywhere: a two-letter value, one ideograph, a short number', () => {
    for (const t of ['Al', '王', '42', '😀😀']) expect(scrubbable(t), t).toBe(false);
    for (const t of ['Анна', '王伟', 'Zoë!']) expect(scrubbable(t), t).toBe(true);
  });

  it('a value weighs the same composed and decomposed: a one-syllable Hangul surname stored as jamo (NFD) does not blank that syllable in other words', () => {
    for (const t of ['김', 'Zoë', 'Zoë!', '王伟', 'Анна']) expect(scrubbable(t.normalize('NFD')), t).toBe(scrubbable(t.normalize('NFC')));
    const out = JSON.stringify(redactValue({ rows: [{ customer_name: '김'.normalize('NFD') }], message: '김치 주문, 김밥 두 줄' }, policy).value);
    expect(out).toContain('김치 주문, 김밥 두 줄');
  });
});

describe('svc-gateway(5) SECRETS: a credential with Latin-1 characters, echoed as the bytes fetch sent', () => {
  it('its UTF-8 reading, with U+FFFD for each of those bytes, is redacted too', () => {
    const secret = 'sëcret-tökén-42';
    const r = new Redactor();
    registerSecret(r, secret);
    // fetch sends a header value one byte a character; the upstream echoes them in a UTF-8 body.
    const body = decodeBody(Buffer.concat([Buffer.from('key='), Buffer.from(secret, 'latin1'), Buffer.from(' end')]), 'text/plain; charset=utf-8', r);
    expect(body).toContain('cret-t');
    const shown = r.redact(body);
    expect(shown).toBe('key=[REDACTED] end');
    expect(r.redact(JSON.stringify({ body }))).not.toContain('cret-t');
  });
});

describe('svc(1) DESCRIPTION: no value sends an escape sequence to the terminal', () => {
  const nasty = 'A\u009b2J\u0085B \u202eevil\u202c \u2028X\u001b[31m\u200b👩\u200d💻 e\u0301';

  it('terminalJson escapes C1 controls, bidi and zero-width characters and separators, and is the same JSON', () => {
    const text = terminalJson({ body: nasty, [`k\u202e`]: 1 });
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]/u);
    expect(JSON.parse(text)).toEqual({ body: nasty, [`k\u202e`]: 1 });
    expect(text).toContain('👩\\u200d💻 e\u0301');
  });

  it('svc run show: the output and the error line', () => {
    const run = {
      run_id: 'run_X', state: 'failed', bundle: { name: 'b', version: '1' }, bundle_id: 'bnd_x', workflow: 'w', department: 'support',
      requested_by: { id: 'ana', role: 'agent', manager: 'm' }, remit_id: 'remit_x', policies: [], current_step: null, pending_approval_id: null,
      usage: { tokens: 0, usd: 0 }, budget: { tokens: 1, usd: 1 }, error: { code: 'deterministic_failure', message: `upstream said\n\u001b[2J${nasty}` },
      last_seq: 3, head_hash: 'ab'.repeat(32), steps: {}, output: { body: nasty },
    } as unknown as Parameters<typeof showHuman>[0];
    const text = showHuman(run);
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\p{Zl}\p{Zp}\u202e\u200b]/u);
    expect(text).toMatch(/^error +deterministic_failure: upstream said \?\[2JA\?2J\?B /m);
  });

  it('cleanLines keeps the lines of a message and nothing a terminal acts on', () => {
    expect(cleanLines('a\u001b[2J\nb\u009b31m\u202e')).toBe('a?[2J\nb?31m\\u{202e}');
  });

  it('cleanText keeps lines, tabs and CRLF endings of a source, and shows everything else a terminal acts on', () => {
    expect(cleanText('allow a\r\n  when true\t# x\n')).toBe('allow a\r\n  when true\t# x\n');
    // A lone CR would show `# note` over `allow all`; ESC and CSI would clear the screen.
    expect(cleanText('allow all\r# note\u001b[2J\u009b31m\u202eZ\u2028')).toBe('allow all?# note?[2J?31m\\u{202e}Z\\u{2028}');
  });

  it('visibleYaml (svc bundle show) escapes invisible characters as YAML escapes and still parses to the same value', () => {
    let controls = '';
    for (let i = 0; i < 0xa0; i++) controls += String.fromCharCode(i);
    const bundle = { description: nasty, controls, tab: 'a\tb', tag: 'x\u{e0041}y', [`k\u200b`]: 1, plain: 'refund' };
    const text = visibleYaml(bundle);
    expect(text).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]/u);
    expect(parseYaml(text)).toEqual(bundle);
    expect(cleanText(text)).toBe(text); // nothing left for the output's own pass to change
    expect(text).toContain('"k\\u200b": 1');
    expect(text).toContain('tag: "x\\U000e0041y"');
    expect(text).toContain('plain: refund'); // untouched strings keep their plain style
  });

  it('svc: an error message from svcd (a not_found quoting an id) is printed cleaned', async () => {
    const server: Server = createServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'not_found', message: `run run_\u001b[2J\u009b31m\u202eX not found`, details: { resource: 'run', id: 'x' } } }));
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      const { port } = server.address() as AddressInfo;
      const r = await runSvc(['run', 'show', 'run_x'], { SVC_KERNEL_URL: `http://127.0.0.1:${port}` });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('svc: not_found: run run_?[2J?31m\\u{202e}X not found');
      expect(r.stderr).not.toMatch(/[\u001b\u009b\u202e]/);
    } finally {
      server.close();
    }
  });
});

describe('shortened: a cut with its mark, one helper for every message that quotes long text', () => {
  it('leaves text up to the limit alone, cuts longer text at a whole character and marks it', () => {
    expect(shortened('abc', 3)).toBe('abc');
    expect(shortened('abcd', 3)).toBe('abc…');
    expect(shortened('ab😀', 3)).toBe('ab…');
  });
});

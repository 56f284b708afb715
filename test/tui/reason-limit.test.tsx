/**
 * The longest reason the inbox's prompt takes (svc-approvals(1) Keys, a and r; interface 4.1
 * POST /approvals/{id}): as long as svcd takes, 4096 characters, not a shorter limit of its
 * own that cut a pasted reason silently; near the limit the prompt counts, and at it says so.
 */
import type { Key } from 'ink';
import { describe, expect, it, vi } from 'vitest';
import { ApiError, ApprovalsApi, REASON_MAX_LENGTH } from '../../cli/tui/approvals-api.js';
import { Inbox } from '../../cli/tui/Inbox.js';
import { editLine } from '../../cli/tui/line-edit.js';
import { startTestDaemon } from '../helpers/daemon.js';
import { approval, inboxProps } from './fake-kernel.js';
import { parkRun, testPublisher } from './parked-run.js';
import { KEY, renderTui } from './render.js';

const FIN = { id: 'fin-1', role: 'finance' };
const NO_KEY = {} as Key;
/** `n` characters (code points, as svcd's schema counts them), some of them emoji and CJK. */
const text = (n: number) => Array.from({ length: n }, (_, i) => (i % 10 === 0 ? '🎉' : i % 10 === 5 ? '款' : 'x')).join('');

function setup() {
  const props = inboxProps([approval(1)], { actor: FIN });
  return { props, t: renderTui(<Inbox {...props} />) };
}

describe('svc-approvals(1) Keys: a reason as long as svcd takes (I 4.1 POST /approvals/{id})', () => {
  it("svcd takes a reason of REASON_MAX_LENGTH characters and refuses one more (the kernel's real limit)", async () => {
    const publisher = testPublisher();
    await using d = await startTestDaemon({ kernel: { publishers: [publisher.spec] } });
    const call = (method: string, path: string, body?: unknown) => d.kernel_(path, { method, body });
    const api = new ApprovalsApi({ baseUrl: d.kernelUrl! });
    // Both parked first: a decided run is leasable again, and would take the next lease.
    const longest = await parkRun(call, publisher, 'INV-1', 150);
    const over = await parkRun(call, publisher, 'INV-2', 150);
    await expect(api.decide(longest.approval_id, 'rejected', FIN, text(REASON_MAX_LENGTH))).resolves.toMatchObject({ run_id: longest.run_id });
    expect((await call('GET', `/approvals/${longest.approval_id}`)).body.reason).toBe(text(REASON_MAX_LENGTH));
    const refused = await api.decide(over.approval_id, 'rejected', FIN, text(REASON_MAX_LENGTH + 1)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 400, code: 'request_invalid' });
  });

  it('the line editor takes up to REASON_MAX_LENGTH characters, counting an emoji as one', () => {
    expect(REASON_MAX_LENGTH).toBe(4096);
    const almost = text(REASON_MAX_LENGTH - 1);
    expect(editLine(almost, '🎉x', NO_KEY, REASON_MAX_LENGTH)).toEqual({ kind: 'edit', value: almost + '🎉' });
    expect(editLine(text(REASON_MAX_LENGTH), 'y', NO_KEY, REASON_MAX_LENGTH)).toEqual({ kind: 'edit', value: text(REASON_MAX_LENGTH) });
  });

  it('the prompt counts near the limit, says when it is reached, and a long pasted reason is sent whole up to it', async () => {
    const { t, props } = setup();
    await t.press('r');
    await t.waitFor('Reason (required):');
    t.stdin.write(text(600));
    let f = await t.waitFor('Reason (required): …');
    expect(f).toMatch(/Enter reject · Esc cancel\s*$/); // far from the limit: no count
    await t.press('\u0015'); // Ctrl+U
    t.stdin.write(text(3700));
    f = await t.waitFor('3700/4096 characters');
    expect(f).toMatch(/Enter reject · Esc cancel · 3700\/4096 characters\s*$/);
    t.stdin.write(text(1000));
    f = await t.waitFor('4096/4096 characters, no more');
    await t.press(KEY.enter);
    expect(props.onDecide).toHaveBeenCalledTimes(1);
    const reason = vi.mocked(props.onDecide).mock.calls[0]![2];
    expect(Array.from(reason)).toHaveLength(REASON_MAX_LENGTH);
    expect(reason).toBe((text(3700) + text(1000)).slice(0, reason.length));
  });
});

/**
 * The `test` connector (decisions §9), present only with SVC_GATEWAY_TEST_TOOLS=1: tools that
 * let black-box tests drive every gateway path from outside. Its probe calls `test.shape` with
 * the shape last set through `POST /v1/test/shape`, so canary drift can be provoked at will.
 * Every test tool has no scope derivation: the remit must grant the literal `test:*`.
 */
import type { ProbeConfig } from '../config.js';
import { compileInputSchema } from '../schema-validator.js';
import { abortMessage, descriptor, UpstreamError, type CallContext, type Connector, type ConnectorTool } from './types.js';

/** The shape the probe returns until a test changes it; it satisfies test.shape's contract. */
export const DEFAULT_TEST_SHAPE: Record<string, unknown> = { ok: true };

const ANY = { type: 'object' };

const TOOLS = {
  echo: { writes: false, description: 'Returns {echo: args}', schema: ANY, contract: { echo: 'object' } },
  write: { writes: true, description: 'A write that returns {written: args}', schema: ANY, contract: { written: 'object' } },
  fail: { writes: false, description: 'Always an upstream error', schema: ANY, contract: {} },
  flaky: {
    writes: false,
    description: 'fail_times (default 1) upstream errors per key (default ""), then {ok: true}',
    schema: { type: 'object', properties: { key: { type: 'string' }, fail_times: { type: 'integer', minimum: 0 } } },
    contract: { ok: 'bool' },
  },
  sleep: {
    writes: false,
    description: 'Waits args.ms milliseconds, then returns {slept_ms}',
    schema: { type: 'object', required: ['ms'], properties: { ms: { type: 'integer', minimum: 0, maximum: 600000 } } },
    contract: { slept_ms: 'number' },
  },
  shape: { writes: false, description: 'Returns args.shape (the canary probe of the test connector)', schema: ANY, contract: { ok: 'bool' } },
} as const;

export class TestConnector implements Connector {
  readonly type = 'test' as const;
  readonly name = 'test';
  readonly timeoutMs = 30_000;
  private shape: Record<string, unknown> = { ...DEFAULT_TEST_SHAPE };
  private readonly failures = new Map<string, number>();
  private readonly list: ConnectorTool[] = Object.entries(TOOLS).map(([op, t]) => ({
    operation: op,
    validate: compileInputSchema(t.schema),
    descriptor: descriptor({
      id: `test.${op}`,
      connector: 'test',
      description: t.description,
      writes: t.writes,
      input_schema: t.schema,
      scope_derivation: 'none',
      contract: { required: { ...t.contract } },
    }),
  }));

  get probe(): ProbeConfig {
    // The full tool id, as decisions §9 names it ("the probe calls test.shape").
    return { tool: 'test.shape', args: { shape: this.shape } };
  }

  /** Sets what the next probes of test.shape return (POST /v1/test/shape). */
  setShape(shape: Record<string, unknown>): void {
    this.shape = shape;
  }

  currentShape(): Record<string, unknown> {
    return this.shape;
  }

  async start(): Promise<void> {}

  tools(): ConnectorTool[] {
    return this.list;
  }

  async deriveScopes(): Promise<string[]> {
    return ['test:*'];
  }

  async call(operation: string, args: Record<string, unknown>, ctx: CallContext): Promise<unknown> {
    switch (operation) {
      case 'echo':
        return { echo: args };
      case 'write':
        return { written: args };
      case 'fail':
        throw new UpstreamError('test.fail always fails');
      case 'flaky': {
        const key = typeof args.key === 'string' ? args.key : '';
        const failTimes = typeof args.fail_times === 'number' ? args.fail_times : 1;
        const seen = this.failures.get(key) ?? 0;
        if (seen < failTimes) {
          this.failures.set(key, seen + 1);
          throw new UpstreamError(`test.flaky failure ${seen + 1} of ${failTimes} for key ${key}`);
        }
        return { ok: true };
      }
      case 'sleep': {
        const ms = Number(args.ms);
        await new Promise<void>((resolve, reject) => {
          if (ctx.signal.aborted) return reject(new UpstreamError(abortMessage(ctx.signal)));
          const timer = setTimeout(resolve, ms);
          ctx.signal.addEventListener('abort', () => (clearTimeout(timer), reject(new UpstreamError(abortMessage(ctx.signal)))), { once: true });
        });
        return { slept_ms: ms };
      }
      case 'shape':
        return args.shape ?? {};
      default:
        throw new UpstreamError(`unknown test operation ${operation}`);
    }
  }

  async close(): Promise<void> {}
}

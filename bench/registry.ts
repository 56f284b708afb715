/** Every benchmark `npm run bench` knows, in the order they run. */
import type { Benchmark } from './lib/harness.js';
import { cliStartupBenchmark } from './cli-startup.js';
import { gatewayBenchmark } from './gateway.js';
import { kernelBenchmark } from './kernel.js';
import { pagesBenchmark } from './pages.js';
import { policyBenchmark } from './policy.js';
import { redactionBenchmark } from './redaction.js';
import { remitBenchmark } from './remit.js';
import { replayBenchmark } from './replay.js';
import { svcdStartupBenchmark } from './svcd-startup.js';

export const BENCHMARKS: Benchmark[] = [remitBenchmark, policyBenchmark, replayBenchmark, redactionBenchmark, gatewayBenchmark, kernelBenchmark, pagesBenchmark, cliStartupBenchmark, svcdStartupBenchmark];

/** Every benchmark `npm run bench` knows, in the order they run. */
import type { Benchmark } from './lib/harness.js';
import { kernelBenchmark } from './kernel.js';

export const BENCHMARKS: Benchmark[] = [kernelBenchmark];

/**
 * The benchmark's flags, sizes and fixed names, shared by every section (flags: bench/run.ts).
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
export const QUICK = argv.includes('--quick');
/** `--only=scale,concurrency,langgraph`: those sections alone, printed, the page left as it is. */
export const ONLY = argv
  .find((arg) => arg.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',');
export const WRITE_DOC = !QUICK && !ONLY && !argv.includes('--no-doc');
export const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? (QUICK ? 40 : 300));
export const WARMUP = QUICK ? 15 : 60;
export const SCALE = QUICK
  ? { depth: Number(process.env.BENCH_DEPTH ?? 1_000), versions: 1_000, sessions: 1_000, iterations: 20 }
  : { depth: Number(process.env.BENCH_DEPTH ?? 10_000), versions: 10_000, sessions: 10_000, iterations: 100 };
/** Section 6: the searched memory namespace's size, and the rounds of each memory operation. */
export const MEMORY = QUICK ? { items: 1_000, iterations: 10 } : { items: 10_000, iterations: 40 };
export const CONTENTION = { writers: 20, writesEach: QUICK ? 10 : 25 };
/** Rounds of the own-code section (bench/own-code.ts), where one request takes microseconds. */
export const STUB_ROUNDS = QUICK ? 500 : 5_000;

export const repoRoot = fileURLToPath(new URL('../', import.meta.url));
export const DOC = join(repoRoot, 'docs', 'benchmarks.md');
export const TENANT = 'bench';
export const API_KEY = 'bench-key';
export const auth = { authorization: `Bearer ${API_KEY}` };
export const jsonHeaders = { ...auth, 'content-type': 'application/json' };

export const log = (line = '') => process.stdout.write(`${line}\n`);

/**
 * Writes docs/benchmarks.md as Biome formats it (`npm test` lints docs' tables too), so that a
 * fresh bench run leaves nothing to reformat by hand.
 */
export function writeDoc(text: string, path: string = DOC): void {
  writeFileSync(path, text);
  execFileSync(join(repoRoot, 'node_modules', '.bin', 'biome'), ['format', '--write', path], { stdio: 'ignore' });
}

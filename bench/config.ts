/**
 * The benchmark's flags, sizes and fixed names, shared by every section (flags: bench/run.ts).
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The sections `--only=` takes (any of them, comma-separated): each alone, printed, the page left as it is. */
export const ONLY_SECTIONS = {
  scale: 'section 2: deep trees, long histories, many sessions',
  concurrency: 'section 3: writers on one session',
  langgraph: "section 5: LangGraph's checkpoint saver",
  'langgraph-graph': "section 5's 20-step graph runs beside the peer saver",
  vectors: "section 6's semantic search rows",
  large: 'section 1d: a 4 MiB state',
  partition: 'the partition load of one tenant, many conversations',
  contended: '100 blind writers on one target at once',
  expiry: 'a state write and reads with and without a TTL (issue 34)',
  erasure: 'a user with 100 sessions and 1,000 memory items erased (issue 34)',
  retention: 'what a session stores after 10,000 writes with and without keepVersions (issue 34)',
} as const;

/** Flags that run one part and write it into the page in place of its last run (the rest of the page is kept). */
const SPLICE_FLAGS = {
  '--memory-only': 'section 6, memory items',
  '--bundles-only': 'section 4, bundle size per Lambda (no DynamoDB needed)',
  '--operations-only': "section 1's table and section 7 without its depth rows",
  '--partition-only': 'the partition-load section',
  '--contended-only': "the blind writers' section",
  '--expiry-only': 'the expiry section',
  '--langgraph-only': "section 5, LangGraph's saver and its graph runs",
} as const;

/** What `npm run bench -- --help` prints (and an unknown flag, before it stops). */
export const USAGE = [
  'npm run bench [-- flags]: the whole bench, printed and written to docs/benchmarks.md.',
  '',
  'Flags:',
  '  --quick            few iterations, small scale; prints only',
  '  --no-doc           do not write docs/benchmarks.md',
  '  --only=a,b,...     those sections alone, printed only:',
  ...Object.entries(ONLY_SECTIONS).map(([name, what]) => `                       ${name.padEnd(12)} ${what}`),
  ...Object.entries(SPLICE_FLAGS).map(([flag, what]) => `  ${flag.padEnd(18)} ${what} alone, written into the page`),
  '  --help, -h         this text',
  '',
  "Env: BENCH_ITERATIONS (default 300; 40 with --quick), BENCH_DEPTH (the scale section's deep chains:",
  '     default 10,000; 1,000 with --quick).',
].join('\n');

/**
 * The bench's command line: whether it asks for help, and what it holds that the bench does not
 * know (an unknown flag, or a section `--only=` does not have). A typo must not start a
 * twelve-minute run that then writes the page.
 */
export function benchArguments(args: readonly string[]): { help: boolean; unknown: string[] } {
  const known = new Set<string>(['--quick', '--no-doc', ...Object.keys(SPLICE_FLAGS)]);
  const unknown: string[] = [];
  for (const arg of args) {
    if (arg === '--help' || arg === '-h' || known.has(arg)) continue;
    if (arg.startsWith('--only=')) {
      const sections = arg.slice('--only='.length).split(',');
      unknown.push(...sections.filter((name) => !Object.hasOwn(ONLY_SECTIONS, name)).map((name) => `--only=${name}`));
      continue;
    }
    unknown.push(arg);
  }
  return { help: args.includes('--help') || args.includes('-h'), unknown };
}

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

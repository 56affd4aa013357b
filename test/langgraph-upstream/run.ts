/**
 * LangGraph's own tests on this repository's saver and store (issue 36): LangGraph.js's test
 * files that build a checkpointer or a store, run once with `MemorySaver` / `InMemoryStore`
 * and once with `AgentStateSaver` / `AgentStateStore` against a server of `npm start`'s making,
 * then compared test by test. A test that passes on the first and not on the second is a
 * finding; docs/langgraph.md lists where they stand.
 *
 *   npm run test:langgraph-upstream -- --checkout ../langgraphjs [--files pregel.test.ts,…] [--out DIR]
 *     [--savers memory,agentstate,peer]
 *
 * `--savers` names the passes, `memory` (the reference, always first) and `agentstate` by
 * default; `peer` runs the files once more on `@rwai/langgraphjs-checkpoint-dynamodb`, a saver
 * that writes DynamoDB directly, on the server's DynamoDB Local (setup-peer.ts).
 *
 * The files are LangGraph's, so they stay in the checkout (outside this repository). The run
 * links the checkout's `node_modules` to this repository's (LangGraph's sources run on the
 * `@langchain/*` packages installed here, the class our saver extends among them) and drops the
 * `"extends": "@tsconfig/recommended"` line of the two tsconfig.json files it compiles (that
 * package is not installed). Not part of `npm test`: it takes about twenty minutes.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startServerProcess } from '../../bench/server-process.js';

/** LangGraph's test files that build a checkpointer or a store, relative to the checkout's `libs/`. */
const FILES = [
  ...[
    'pregel.test.ts',
    'func.test.ts',
    'time_travel.test.ts',
    'time_travel_extended.test.ts',
    'delta_channel.test.ts',
    'checkpointer.test.ts',
    'python_port/checkpoint.test.ts',
    'python_port/interrupt.test.ts',
    'python_port/graph_structure.test.ts',
    'pregel/pregel.cancellation.test.ts',
    'pregel.stream.test.ts',
    'run_control.test.ts',
    'execution_info.test.ts',
    'concurrent-thread-isolation.test.ts',
    'errors.test.ts',
    'node_error_handler.test.ts',
    'zod_state.test.ts',
    'set_node_defaults.test.ts',
    'prebuilt.test.ts',
    'utils.test.ts',
  ].map((file) => `langgraph-core/src/tests/${file}`),
  'checkpoint/src/tests/store.test.ts',
  'checkpoint/src/tests/vector.test.ts',
];

const repository = fileURLToPath(new URL('../../', import.meta.url));

interface Outcome {
  file: string;
  name: string;
  status: string;
  failure?: string;
}

/** Vitest's JSON report, as far as it is read here. */
interface JsonReport {
  testResults: Array<{
    name: string;
    assertionResults: Array<{ fullName: string; status: string; failureMessages?: string[] }>;
  }>;
}

function prepare(checkout: string): void {
  if (!existsSync(join(checkout, 'libs', 'langgraph-core', 'src', 'tests'))) {
    throw new Error(`${checkout} is not a checkout of langgraphjs (no libs/langgraph-core/src/tests)`);
  }
  const modules = join(checkout, 'node_modules');
  if (!existsSync(modules)) symlinkSync(join(repository, 'node_modules'), modules, 'dir');
  for (const lib of ['langgraph-core', 'checkpoint']) {
    const tsconfig = join(checkout, 'libs', lib, 'tsconfig.json');
    const text = readFileSync(tsconfig, 'utf8');
    const without = text.replace(/^\s*"extends":\s*"@tsconfig\/recommended",?\s*\n/m, '');
    if (without !== text) writeFileSync(tsconfig, without);
  }
}

/** The passes a run may make: the files as they are, on ours, on the peer saver. */
const SAVERS = ['memory', 'agentstate', 'peer'] as const;
type Saver = (typeof SAVERS)[number];

function runVitest(checkout: string, saver: Saver, files: string[], report: string, env: NodeJS.ProcessEnv) {
  const vitest = join(repository, 'node_modules', 'vitest', 'vitest.mjs');
  const config = join(repository, 'test', 'langgraph-upstream', 'vitest.config.ts');
  const args = [vitest, 'run', '--config', config, '--reporter=json', `--outputFile=${report}`, ...files];
  return new Promise<void>((done, fail) => {
    const child = spawn(process.execPath, args, {
      cwd: repository,
      env: { ...process.env, ...env, LANGGRAPH_CHECKOUT: checkout, SAVER: saver },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child.once('error', fail);
    // Failing tests make vitest exit 1: the report says which.
    child.once('exit', () => (existsSync(report) ? done() : fail(new Error(`vitest wrote no report (${saver})`))));
  });
}

function outcomes(report: string, checkout: string): Map<string, Outcome> {
  const parsed = JSON.parse(readFileSync(report, 'utf8')) as JsonReport;
  const byTest = new Map<string, Outcome>();
  const libs = `${join(checkout, 'libs')}/`;
  for (const result of parsed.testResults) {
    const file = result.name.startsWith(libs) ? result.name.slice(libs.length) : result.name;
    for (const test of result.assertionResults) {
      const failure = test.failureMessages?.[0]?.split('\n')[0];
      byTest.set(`${file} › ${test.fullName}`, { file, name: test.fullName, status: test.status, ...(failure ? { failure } : {}) });
    }
  }
  return byTest;
}

const NAMES: Record<Saver, string> = {
  memory: 'MemorySaver / InMemoryStore:',
  agentstate: 'AgentStateSaver / AgentStateStore:',
  peer: 'peer saver / InMemoryStore:',
};
const pad = (text: string) => text.padEnd(35);

const count = (tests: Map<string, Outcome>, status: string) => [...tests.values()].filter((test) => test.status === status).length;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { checkout: { type: 'string' }, files: { type: 'string' }, out: { type: 'string' }, savers: { type: 'string' } },
  });
  if (!values.checkout) throw new Error('--checkout <a checkout of langgraphjs> is required');
  const checkout = resolve(values.checkout);
  const files = values.files ? values.files.split(',').map((name) => FILES.find((file) => file.endsWith(`/${name}`)) ?? name) : FILES;
  const savers = (values.savers ?? 'memory,agentstate').split(',') as Saver[];
  if (savers[0] !== 'memory' || savers.some((saver) => !SAVERS.includes(saver))) {
    throw new Error(`--savers: memory first, then some of ${SAVERS.slice(1).join(', ')}`);
  }
  const out = values.out ? resolve(values.out) : join(tmpdir(), `langgraph-upstream-${Date.now()}`);
  mkdirSync(out, { recursive: true });
  prepare(checkout);

  const apiKey = `upstream-${randomUUID()}`;
  const server = await startServerProcess(`upstream:${apiKey}`);
  try {
    const env = {
      AGENTSTATE_UPSTREAM_URL: server.url,
      AGENTSTATE_UPSTREAM_KEY: apiKey,
      AGENTSTATE_UPSTREAM_DYNAMODB: server.dynamoDbEndpoint,
    };
    for (const saver of savers) await runVitest(checkout, saver, files, join(out, `${saver}.json`), env);
  } finally {
    await server.stop();
  }

  const memory = outcomes(join(out, 'memory.json'), checkout);
  const totals = (tests: Map<string, Outcome>) =>
    `${count(tests, 'passed')} passed, ${count(tests, 'failed')} failed, ${count(tests, 'skipped') + count(tests, 'pending')} skipped`;
  const lines = [`LangGraph's own tests, ${memory.size} run (${files.length} files):`, `  ${pad(NAMES.memory)} ${totals(memory)}`];
  for (const saver of savers.slice(1)) {
    const other = outcomes(join(out, `${saver}.json`), checkout);
    const findings = [...memory.entries()].filter(([key, test]) => test.status === 'passed' && other.get(key)?.status !== 'passed');
    lines.push(
      `  ${pad(NAMES[saver])} ${totals(other)}`,
      `  passing on MemorySaver and not on ${saver}: ${findings.length}`,
      ...findings.map(([key]) => `    ${key}\n      ${other.get(key)?.failure ?? other.get(key)?.status ?? 'not run'}`),
    );
  }
  lines.push(`Reports: ${out}`);
  writeFileSync(join(out, 'summary.txt'), `${lines.join('\n')}\n`);
  console.log(lines.join('\n'));
}

await main();

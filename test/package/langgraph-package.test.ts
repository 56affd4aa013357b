import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { compile, npm, pack, root, run, typeErrorsOf, userTsconfig } from './support.js';

/**
 * `@agentstate/langgraph` as a user gets it: packed by npm beside the client it depends on,
 * installed from the two tarballs into an empty project outside this repository together with
 * the LangGraph packages it is made for (the versions this repository tests: from npm's cache
 * when it holds them, else the registry, since `npm ci` caches tarballs but not the package
 * documents an install by name needs),
 * then a LangGraph program of the user's type-checked against the package's declarations and run
 * against `npm start`: a graph that keeps its thread across two savers, and a store.
 */
const versionOf = (name: string) =>
  (JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

let scratch: string;
let project: string;
let api: RunningApi;

/** The user's program: a counting graph on AgentStateSaver, and AgentStateStore's put and search. */
const program = `
import { AgentStateSaver, AgentStateStore } from '@agentstate/langgraph';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';

declare const process: { env: Record<string, string | undefined> };
const baseUrl = process.env.AGENTSTATE_URL ?? '';
const thread = { configurable: { thread_id: process.env.THREAD_ID ?? 'packed' } };

const Counter = Annotation.Root({
  count: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
  seen: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
});
const graphOn = (saver: AgentStateSaver) =>
  new StateGraph(Counter)
    .addNode('step', (state: typeof Counter.State) => ({ count: 1, seen: [\`step \${state.count + 1}\`] }))
    .addEdge(START, 'step')
    .addEdge('step', END)
    .compile({ checkpointer: saver });

const first = await graphOn(new AgentStateSaver({ baseUrl, apiKey: 'dev-key', prefix: 'pkg' })).invoke({ count: 0 }, thread);
// Another process, another saver: the thread goes on where the first left it.
const again = new AgentStateSaver({ baseUrl, apiKey: 'dev-key', prefix: 'pkg' });
const second = await graphOn(again).invoke({ count: 0 }, thread);
const snapshot = await graphOn(again).getState(thread);

const store = new AgentStateStore({ baseUrl, apiKey: 'dev-key', prefix: 'pkg' });
await store.put(['users', 'ana'], 'diet', { likes: 'fish', strict: true });
const item = await store.get(['users', 'ana'], 'diet');
// Search follows writes within a moment (docs/langgraph.md), so a program waits for it.
let found = await store.search(['users'], { filter: { strict: true } });
for (let tries = 0; found.length === 0 && tries < 50; tries++) {
  await new Promise((resolve) => setTimeout(resolve, 200));
  found = await store.search(['users'], { filter: { strict: true } });
}

const count: number = second.count;
console.log(JSON.stringify({
  first: first.count,
  second: count,
  seen: second.seen,
  next: snapshot.next,
  item: item?.value,
  found: found.map((hit) => [hit.namespace, hit.key]),
}));
`;

/** A program the declarations must refuse: the saver's options have no \`url\`. */
const wrongProgram = `
import { AgentStateSaver } from '@agentstate/langgraph';
export const saver = new AgentStateSaver({ url: 'http://localhost:4000' });
`;

const tsconfig = { ...userTsconfig, compilerOptions: { ...userTsconfig.compilerOptions, skipLibCheck: true } };

beforeAll(async () => {
  // Prepare: both tarballs as `npm publish` would upload them (prepack builds each dist/).
  scratch = mkdtempSync(join(os.tmpdir(), 'agentstate-langgraph-package-'));
  const client = await pack('packages/client', scratch);
  const langgraph = await pack('packages/langgraph', scratch);

  // An empty project of the user's, outside this repository, with LangGraph as a user adds it.
  project = join(scratch, 'user-project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'user-project', private: true, type: 'module' }));
  const langchain = ['@langchain/core', '@langchain/langgraph'].map((name) => `${name}@${versionOf(name)}`);
  await run(npm, ['install', '--prefer-offline', '--no-audit', '--no-fund', client, langgraph, ...langchain], {
    cwd: project,
    maxBuffer: 16 * 1024 * 1024,
  });
  writeFileSync(join(project, 'main.ts'), program);
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
  api = await startApi();
}, 240_000);

afterAll(async () => {
  await api?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('the packed @agentstate/langgraph', () => {
  it('installs beside LangGraph with its client as its one dependency, nothing of the server', () => {
    const installed = join(project, 'node_modules/@agentstate/langgraph');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
    expect(manifest.dependencies).toEqual({ '@agentstate/client': expect.any(String) });
    expect(Object.keys(manifest.peerDependencies)).toEqual(['@langchain/core', '@langchain/langgraph-checkpoint']);
    expect(statSync(join(installed, 'dist/index.js')).isFile()).toBe(true);
    expect(statSync(join(installed, 'dist/index.d.ts')).isFile()).toBe(true);
    // The client came from its own tarball, not from this repository's workspace.
    expect(statSync(join(project, 'node_modules/@agentstate/client/dist/index.js')).isFile()).toBe(true);
  });

  it("type-checks the user's LangGraph program against its declarations, and refuses a wrongly typed one", async () => {
    // Act
    await compile(project);
    const wrong = await typeErrorsOf(project, tsconfig, wrongProgram);

    // Assess
    expect(statSync(join(project, 'out/main.js')).isFile()).toBe(true);
    expect(wrong).toMatch(/wrong\.ts\(3,44\): error TS2353: Object literal may only specify known properties, and 'url' does not exist/);
  });

  it('runs that program against npm start: the thread outlives its saver, the store finds its item', async () => {
    // Act
    const { stdout } = await run(process.execPath, ['out/main.js'], {
      cwd: project,
      env: { ...process.env, AGENTSTATE_URL: api.url, THREAD_ID: `packed-${Date.now().toString(36)}` },
    });

    // Assess
    expect(JSON.parse(stdout)).toEqual({
      first: 1,
      second: 2,
      seen: ['step 1', 'step 2'],
      next: [],
      item: { likes: 'fish', strict: true },
      found: [[['users', 'ana'], 'diet']],
    });
  });
});

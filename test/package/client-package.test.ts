import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { compile, npm, pack, root, run, typeErrorsOf, userTsconfig } from './support.js';

/**
 * `@agentstate/client` as a user gets it: packed by npm (which builds it on prepack), installed
 * from the tarball alone into an empty project outside this repository (offline: it needs
 * nothing from a registry), type-checked there by a program of the user's, and that program run
 * against `npm start`. publint and arethetypeswrong check the tarball as a registry would see it.
 */

let scratch: string;
let project: string;
let tarball: string;
let api: RunningApi;

/** Every file under `dir` with its size. */
function sizeOf(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? sizeOf(path) : statSync(path).size;
  }
  return total;
}

/** A user's program: everyday calls, typed from the package's own declarations. */
const program = `
import { AgentStateError, createClient, type StateView } from '@agentstate/client';

declare const process: { env: Record<string, string | undefined>; exitCode?: number };

type Chat = { model: string; turns: number; lastSeen?: Date };

const client = createClient({ baseUrl: process.env.AGENTSTATE_URL ?? '', apiKey: 'dev-key' });
const chat = client.session<Chat>(process.env.SESSION_ID ?? 'packed', { initialState: { model: 'fast', turns: 0 } });

const initial: Chat = await chat.getState();
const merged: Chat = await chat.setState({ turns: 1, lastSeen: new Date('2026-01-02T03:04:05.000Z') });
const read = await chat.read();
const raw: StateView = await client.state.get(process.env.SESSION_ID ?? 'packed');
let refused = '';
try {
  await client.state.replace(process.env.SESSION_ID ?? 'packed', { turns: 9 }, { ifMatch: 99 });
} catch (error) {
  if (error instanceof AgentStateError) refused = \`\${error.status} \${error.code}\`;
}
console.log(JSON.stringify({ initial, merged, lastSeenIsDate: read.state.lastSeen instanceof Date, version: read.version, rawVersion: raw.version, refused }));
client.close();
`;

/** A program the declarations must refuse: a state typed as Chat has no string `turns`. */
const wrongProgram = `
import { createClient } from '@agentstate/client';
const chat = createClient({ baseUrl: 'http://localhost:4000', apiKey: 'dev-key' }).session<{ turns: number }>('x');
const turns: string = (await chat.getState()).turns;
export { turns };
`;

const tsconfig = userTsconfig;

beforeAll(async () => {
  // Prepare: the tarball, exactly as `npm publish` would upload it (prepack builds dist/).
  scratch = mkdtempSync(join(os.tmpdir(), 'agentstate-client-package-'));
  tarball = await pack('packages/client', scratch);

  // An empty project of the user's, outside this repository so nothing resolves from its node_modules.
  project = join(scratch, 'user-project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'user-project', private: true, type: 'module' }));
  await run(npm, ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: project });
  writeFileSync(join(project, 'main.ts'), program);
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
  api = await startApi();
}, 180_000);

afterAll(async () => {
  await api?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('the packed @agentstate/client', () => {
  it('installs from the tarball alone, with no dependency of its own and nothing of the server', () => {
    // Assess: the project holds the client and nothing else.
    expect(readdirSync(join(project, 'node_modules')).filter((name) => !name.startsWith('.'))).toEqual(['@agentstate']);
    expect(readdirSync(join(project, 'node_modules/@agentstate'))).toEqual(['client']);
    const installed = join(project, 'node_modules/@agentstate/client');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
    expect(manifest.dependencies ?? {}).toEqual({});
    expect(readdirSync(join(installed, 'dist'))).toEqual(expect.arrayContaining(['index.js', 'index.d.ts']));
    // The complaint was 109 MB of server dependencies; the client is a few hundred KB.
    expect(sizeOf(installed)).toBeLessThan(1024 * 1024);
  });

  it('is the only way to the client: the server package exports nothing', () => {
    // Assess: agentstate itself is an application; its package.json offers no client entry.
    const server = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(server.exports).toBeUndefined();
    expect(server.workspaces).toEqual(['packages/*']);
  });

  it('type-checks a program against its declarations, and refuses a wrongly typed one', async () => {
    // Act
    await compile(project);
    const wrong = await typeErrorsOf(project, tsconfig, wrongProgram);

    // Assess
    expect(statSync(join(project, 'out/main.js')).isFile()).toBe(true);
    expect(wrong).toMatch(/wrong\.ts\(4,7\): error TS2322: Type 'number' is not assignable to type 'string'/);
  });

  it('runs that program against npm start', async () => {
    // Act
    const { stdout } = await run(process.execPath, ['out/main.js'], {
      cwd: project,
      env: { ...process.env, AGENTSTATE_URL: api.url, SESSION_ID: `packed-${Date.now().toString(36)}` },
    });

    // Assess
    expect(JSON.parse(stdout)).toEqual({
      initial: { model: 'fast', turns: 0 },
      merged: { model: 'fast', turns: 1, lastSeen: '2026-01-02T03:04:05.000Z' },
      lastSeenIsDate: true,
      version: 1,
      rawVersion: 1,
      refused: '412 version_mismatch',
    });
  });

  it('is clean under publint and arethetypeswrong (ESM only, with its types)', async () => {
    // Act
    const publint = await run(process.execPath, [join(root, 'node_modules/publint/src/cli.js'), 'run', tarball, '--strict'], {
      cwd: scratch,
    });
    const attw = await run(
      process.execPath,
      [join(root, 'node_modules/@arethetypeswrong/cli/dist/index.js'), tarball, '--profile', 'esm-only', '--format', 'json'],
      { cwd: scratch, maxBuffer: 16 * 1024 * 1024 },
    );

    // Assess
    expect(publint.stdout).toContain('All good!');
    // ESM only on purpose (Node 20 and every bundler import it): the profile leaves out the
    // CommonJS resolutions, and the run fails on any problem in the others.
    const problems = JSON.parse(attw.stdout).analysis.problems as Array<{ resolutionKind: string }>;
    expect(problems.filter((problem) => !['node10', 'node16-cjs'].includes(problem.resolutionKind))).toEqual([]);
  });
});

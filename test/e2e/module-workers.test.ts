import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * A `module:` worker is imported into the server, which holds every tenant's keys. Through the
 * real HTTP API of `npm start`, another tenant tries what the attacker of issue 16 did: a
 * planted module outside the module directories, a link from inside to outside, `..` and
 * absolute paths, and a link turned after registration. A planted module that runs copies
 * `AGENTSTATE_API_KEYS` into its marker file, so "refused" is checked as "never ran" too.
 */

let root: string;
let allowed: string;
let outside: string;
let api: RunningApi;
let http: ApiClient;
const markers: string[] = [];

/** What the attacker plants: a module that steals the server's keys the moment it is imported. */
function plant(file: string): string {
  const marker = `${file}.ran`;
  markers.push(marker);
  writeFileSync(
    file,
    [
      "import { writeFileSync } from 'node:fs';",
      `writeFileSync(${JSON.stringify(marker)}, String(process.env.AGENTSTATE_API_KEYS));`,
      'export const decide = () => ({ state: { keys: String(process.env.AGENTSTATE_API_KEYS) } });',
    ].join('\n'),
  );
  return file;
}

const nothingRan = () => expect(markers.filter((marker) => existsSync(marker)).map((marker) => readFileSync(marker, 'utf8'))).toEqual([]);

beforeAll(async () => {
  root = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentstate-e2e-modules-')));
  allowed = path.join(root, 'workers');
  outside = path.join(root, 'elsewhere');
  mkdirSync(allowed);
  mkdirSync(outside);
  writeFileSync(path.join(allowed, 'counter.mjs'), 'export const decide = (r) => ({ state: { turns: (r.state?.turns ?? 0) + 1 } });\n');
  // The operator's directories: one absolute, and `examples` relative to where the server runs.
  api = await startApi({ AGENTSTATE_MODULE_DIRS: [allowed, 'examples'].join(path.delimiter) });
  http = api.client;
});

afterAll(async () => {
  await api?.stop();
  rmSync(root, { recursive: true, force: true });
});

async function register(url: string, key = 'other-key') {
  const agentId = uniqueId('mod');
  const response = await http.put(`/v1/agents/${agentId}`, { worker: { url } }, { key });
  return { agentId, response };
}

describe('module: workers through the HTTP API', () => {
  it('runs a module inside the module directories, relative to the server or absolute', async () => {
    // Act
    const example = await register('module:examples/worker.ts');
    const absolute = await register(`module:${path.join(allowed, 'counter.mjs')}`);
    const sid = uniqueId('s');
    const decided = await http.post(
      `/v1/sessions/${sid}/decide`,
      { trigger: { type: 'x' }, agentId: absolute.agentId },
      { key: 'other-key' },
    );
    // Assess
    expect(example.response.status).toBe(201);
    expect(absolute.response.status).toBe(201);
    expect(decided.status).toBe(200);
    expect(decided.body.state).toEqual({ turns: 1 });
  });

  it.each([
    ['a planted module outside', () => plant(path.join(outside, 'planted.mjs'))],
    ['a .. path out of a module directory', () => `${allowed}/../elsewhere/${path.basename(plant(path.join(outside, 'dotdot.mjs')))}`],
    ['examples/.. to a file of the repository', () => 'examples/../bench/load-server.ts'],
    [
      'a link inside pointing out',
      () => {
        const link = path.join(allowed, 'innocent.mjs');
        symlinkSync(plant(path.join(outside, 'link-target.mjs')), link);
        return link;
      },
    ],
    ['/etc/passwd', () => '/etc/passwd'],
    ['../../etc/hostname', () => '../../etc/hostname'],
  ])('refuses %s with 400, stores no agent and runs nothing', async (_name, target) => {
    // Act
    const { agentId, response } = await register(`module:${target()}`);
    const stored = await http.get(`/v1/agents/${agentId}`, { key: 'other-key' });
    // Assess
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('invalid_request');
    expect(response.body.detail).toContain('AGENTSTATE_MODULE_DIRS');
    expect(response.text).not.toContain('root:');
    expect(stored.status).toBe(404);
    nothingRan();
  });

  it('checks again before the import: a link turned after registration fails the decision and runs nothing', async () => {
    // Prepare: the link points at an allowed module when the agent is registered.
    const link = path.join(allowed, 'turned.mjs');
    symlinkSync(path.join(allowed, 'counter.mjs'), link);
    const { agentId, response } = await register(`module:${link}`);
    expect(response.status).toBe(201);
    // Act: the link is turned to a planted file outside before the first decision.
    unlinkSync(link);
    symlinkSync(plant(path.join(outside, 'turned-target.mjs')), link);
    const sid = uniqueId('s');
    const decided = await http.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'x' }, agentId }, { key: 'other-key' });
    const state = await http.get(`/v1/sessions/${sid}/state`, { key: 'other-key' });
    // Assess
    expect(decided.status).toBe(502);
    expect(decided.body.code).toBe('worker_failed');
    expect(state.body.version).toBe(0);
    nothingRan();
  });

  it('reports a module that fails to load without quoting it', async () => {
    // Prepare: a module inside that fails at its first line, naming something secret.
    const broken = path.join(allowed, 'broken.mjs');
    writeFileSync(broken, 'export const decide = TOKEN_a8d2e1;\n');
    const { agentId } = await register(`module:${broken}`);
    // Act
    const decided = await http.post(`/v1/sessions/${uniqueId('s')}/decide`, { trigger: { type: 'x' }, agentId }, { key: 'other-key' });
    // Assess
    expect(decided.status).toBe(502);
    expect(decided.body.code).toBe('worker_failed');
    expect(decided.text).not.toContain('TOKEN_a8d2e1');
  });
});

import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { callWorker, type WorkerCallOptions } from '../../functions/workers/call-worker.js';
import { type ModuleDirs, moduleDirsFromEnv } from '../../functions/workers/module-dirs.js';
import { allowedModulePath, ModuleRefusedError } from '../../functions/workers/module-worker.js';
import { validateWorkerUrl } from '../../functions/workers/worker-registration.js';

/**
 * `module:` workers run inside the server, so only files the operator put in the module
 * directories may be named (API.md section 6). Each test plants what an attacker would: a
 * module outside, a link from inside to outside, `..`, absolute paths; a planted module that
 * runs leaves a marker file, so "refused" also means "never ran".
 */

let root: string;
let allowed: string;
let outside: string;
let dirs: ModuleDirs;
let LOCAL: WorkerCallOptions;
const request = JSON.stringify({ session_id: 's1', state: null });

/** A module that, if it is ever imported, leaves `marker` behind: it must never appear. */
function planted(file: string, marker: string): string {
  writeFileSync(
    file,
    `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'ran');\nexport const decide = () => ({ state: { pwned: true } });\n`,
  );
  return file;
}

function refusal(url: string): AgentStateError {
  try {
    validateWorkerUrl(url, LOCAL);
  } catch (error) {
    expect(error).toBeInstanceOf(AgentStateError);
    return error as AgentStateError;
  }
  throw new Error(`expected ${url} to be refused`);
}

async function callRefusal(url: string): Promise<AgentStateError> {
  try {
    await callWorker({ url }, request, LOCAL);
  } catch (error) {
    expect(error).toBeInstanceOf(AgentStateError);
    return error as AgentStateError;
  }
  throw new Error(`expected a call of ${url} to fail`);
}

beforeAll(() => {
  // Prepare: <root>/allowed is the operator's module directory, <root>/outside is not.
  root = realpathSync(mkdtempSync(path.join(tmpdir(), 'agentstate-modules-')));
  allowed = path.join(root, 'allowed');
  outside = path.join(root, 'outside');
  mkdirSync(allowed);
  mkdirSync(outside);
  mkdirSync(`${allowed}-evil`);
  writeFileSync(path.join(allowed, 'ok.mjs'), 'export const decide = (request) => ({ state: { seen: request.session_id } });\n');
  dirs = moduleDirsFromEnv({ AGENTSTATE_MODULE_DIRS: allowed }, root);
  LOCAL = { allowLoopbackHttp: true, moduleDirs: dirs };
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the module directories', () => {
  it('default to examples and workers under the server directory', () => {
    const defaults = moduleDirsFromEnv({}, '/srv/app');
    expect(defaults.configured).toEqual(['examples', 'workers']);
    expect(defaults.absolute).toEqual(['/srv/app/examples', '/srv/app/workers']);
  });

  it('come from AGENTSTATE_MODULE_DIRS, separated like PATH and resolved against the server directory', () => {
    const configured = moduleDirsFromEnv({ AGENTSTATE_MODULE_DIRS: ['agents', '/opt/workers', ''].join(path.delimiter) }, '/srv/app');
    expect(configured.absolute).toEqual(['/srv/app/agents', '/opt/workers']);
  });
});

describe('a module inside the module directories', () => {
  it('is accepted by relative and absolute path, and runs', async () => {
    // Act
    const relative = `module:allowed/ok.mjs`;
    const absolute = `module:${path.join(allowed, 'ok.mjs')}`;
    // Assess
    expect(() => validateWorkerUrl(relative, LOCAL)).not.toThrow();
    expect(() => validateWorkerUrl(absolute, LOCAL)).not.toThrow();
    expect(await callWorker({ url: absolute }, request, LOCAL)).toEqual({ state: { seen: 's1' } });
  });

  it('may be reached through a link that stays inside, and through a module directory that is itself a link', async () => {
    symlinkSync(path.join(allowed, 'ok.mjs'), path.join(allowed, 'alias.mjs'));
    symlinkSync(allowed, path.join(root, 'linked-dir'));
    const viaLinkedDir: WorkerCallOptions = { ...LOCAL, moduleDirs: moduleDirsFromEnv({ AGENTSTATE_MODULE_DIRS: 'linked-dir' }, root) };
    expect(() => validateWorkerUrl('module:allowed/alias.mjs', LOCAL)).not.toThrow();
    expect(await callWorker({ url: 'module:linked-dir/ok.mjs' }, request, viaLinkedDir)).toEqual({ state: { seen: 's1' } });
  });

  it('examples/worker.ts is allowed with the default directories', () => {
    expect(allowedModulePath('examples/worker.ts', moduleDirsFromEnv({}))).toBe(path.resolve('examples/worker.ts'));
  });
});

describe('a module outside the module directories', () => {
  it.each([
    ['an absolute path outside', () => planted(path.join(outside, 'planted.mjs'), path.join(outside, 'ran-absolute'))],
    [
      'a .. path out of the directory',
      () => {
        planted(path.join(outside, 'dotdot.mjs'), path.join(outside, 'ran-dotdot'));
        return 'allowed/../outside/dotdot.mjs';
      },
    ],
    ['a sibling directory that only shares the prefix', () => planted(`${allowed}-evil/x.mjs`, path.join(outside, 'ran-prefix'))],
    [
      'a link inside pointing out',
      () => {
        planted(path.join(outside, 'target.mjs'), path.join(outside, 'ran-link'));
        symlinkSync(path.join(outside, 'target.mjs'), path.join(allowed, 'link-out.mjs'));
        return path.join(allowed, 'link-out.mjs');
      },
    ],
  ])('is refused at registration and never runs: %s', async (_name, plant) => {
    // Prepare
    const modulePath = plant();
    // Act
    const error = refusal(`module:${modulePath}`);
    const atCall = await callRefusal(`module:${modulePath}`);
    // Assess
    expect(error.status).toBe(400);
    expect(error.code).toBe('invalid_request');
    expect(error.message).toContain('AGENTSTATE_MODULE_DIRS');
    expect(atCall.code).toBe('worker_failed');
    for (const marker of ['ran-absolute', 'ran-dotdot', 'ran-prefix', 'ran-link'])
      expect(existsSync(path.join(outside, marker))).toBe(false);
  });

  it.each([
    ['/etc/passwd'],
    ['/etc/hostname'],
    ['../../etc/hostname'],
    ['bench/load-server.ts'],
    ['examples/../bench/load-server.ts'],
    ['allowed'],
    ['allowed/'],
    ['allowed/missing.mjs'],
  ])('refuses %s with the same words, whether it exists or not', (modulePath) => {
    const error = refusal(`module:${modulePath}`);
    expect(error.code).toBe('invalid_request');
    expect(error.message).toBe(refusal('module:/no/such/file.mjs').message);
  });

  it('refuses a file inside that is not a JavaScript or TypeScript module', () => {
    writeFileSync(path.join(allowed, 'notes.json'), '{"decide": 1}');
    expect(refusal('module:allowed/notes.json').code).toBe('invalid_request');
  });

  it('is checked again before the import: a link turned after registration does not run its new target', async () => {
    // Prepare: a link to an allowed module, registered while it pointed inside.
    const link = path.join(allowed, 'turned.mjs');
    symlinkSync(path.join(allowed, 'ok.mjs'), link);
    expect(() => validateWorkerUrl('module:allowed/turned.mjs', LOCAL)).not.toThrow();
    // Act: the link is turned to a planted file outside.
    const marker = path.join(outside, 'ran-turned');
    unlinkSync(link);
    symlinkSync(planted(path.join(outside, 'turned-target.mjs'), marker), link);
    const error = await callRefusal('module:allowed/turned.mjs');
    // Assess
    expect(error.code).toBe('worker_failed');
    expect(error.status).toBe(502);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('a module that fails to load', () => {
  it.each([
    ['a reference error', 'export const decide = SECRET_TOKEN_7f3a;\n'],
    ['a syntax error', 'SECRET_TOKEN_7f3a: root:x:0:0:root:/root:/bin/bash\n'],
  ])('is reported without any of its text: %s', async (_name, text) => {
    // Prepare
    const file = path.join(allowed, `broken-${_name.replace(/\W+/g, '-')}.mjs`);
    writeFileSync(file, text);
    // Act
    const error = await callRefusal(`module:${file}`);
    // Assess
    expect(error.code).toBe('worker_failed');
    expect(error.message).toContain('could not load the module worker');
    expect(error.message).not.toContain('SECRET_TOKEN');
    expect(error.message).not.toContain('root:x');
  });
});

describe('allowedModulePath', () => {
  it('answers the real path, which is what gets imported', () => {
    expect(allowedModulePath('allowed/alias.mjs', dirs)).toBe(path.join(allowed, 'ok.mjs'));
  });

  it('refuses empty paths and NUL bytes', () => {
    expect(() => allowedModulePath('', dirs)).toThrow(ModuleRefusedError);
    expect(() => allowedModulePath('allowed/ok.mjs\0', dirs)).toThrow(ModuleRefusedError);
  });
});

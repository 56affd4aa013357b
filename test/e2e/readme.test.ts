import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * The README as a newcomer runs it, top to bottom, against `npm start` (behind the contract
 * proxy, so every request it makes is held to docs/openapi.json too).
 *
 * Its shell walk-throughs (the ```sh blocks that use `$AS`) run in order in one bash, as if
 * pasted into one terminal. A `# ` line right after a command is what it prints: `…` stands for
 * text left out, and every other part must be there, in that order. The TypeScript snippet runs
 * as a program and must end by itself. So the README cannot drift from what the server does.
 */
const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const LOCAL_BASE_URL = 'http://localhost:4000';

interface Expectation {
  /** Where in the README, for the failure message. */
  line: number;
  expected: string;
}

/** The shell walk-throughs as one script, with a marker printed where each shown output ends. */
function walkThrough(baseUrl: string): { script: string; expectations: Expectation[][] } {
  const lines = readme.split('\n');
  const script: string[] = [];
  const expectations: Expectation[][] = [];
  let inBlock = false;
  let runnable = false;
  let group: Expectation[] | undefined;
  lines.forEach((line, index) => {
    if (!inBlock && line === '```sh') {
      const end = lines.indexOf('```', index + 1);
      runnable = lines.slice(index + 1, end).some((text) => text.includes('$AS') || text.startsWith('export AS='));
      inBlock = true;
      return;
    }
    if (inBlock && line === '```') {
      inBlock = false;
      return;
    }
    if (!inBlock || !runnable) return;
    if (line.startsWith('# ')) {
      if (!group) {
        group = [];
        expectations.push(group);
        script.push(`printf '\\n@@readme-output-${expectations.length - 1}@@\\n'`);
      }
      group.push({ line: index + 1, expected: line.slice(2) });
      return;
    }
    group = undefined;
    script.push(line.replace(`export AS=${LOCAL_BASE_URL}`, `export AS=${baseUrl}`));
  });
  return { script: script.join('\n'), expectations };
}

/** What is missing from `actual`, by the README's `…` convention; empty when it fits. */
function misfit(expected: string, actual: string): string | undefined {
  let from = 0;
  for (const part of expected.split('…').map((text) => text.trim())) {
    if (!part) continue;
    const at = actual.indexOf(part, from);
    if (at < 0) return part;
    from = at + part.length;
  }
  return undefined;
}

let api: RunningApi;
let scratch: string;

beforeAll(async () => {
  api = await startApi();
  scratch = mkdtempSync(join(os.tmpdir(), 'agentstate-readme-'));
});
afterAll(async () => {
  await api?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('the README', () => {
  it('names the base URL once, in the variable every shell block uses', () => {
    const { script } = walkThrough('$BASE');
    expect(script).toContain('export AS=$BASE');
    expect(script).not.toContain('localhost:4000');
  });

  it('prints what it shows, running its shell walk-throughs top to bottom', async () => {
    // Prepare
    const { script, expectations } = walkThrough(api.url);
    expect(expectations.length).toBeGreaterThan(10);

    // Act: one bash, in the repository (the worker module and `ws` resolve from here).
    const { stdout } = await run('bash', ['-c', script], { cwd: root, timeout: 90_000, maxBuffer: 16 * 1024 * 1024 });

    // Assess: each shown output against what the commands before it printed.
    const segments = stdout.split(/\n@@readme-output-\d+@@\n/);
    const misfits = expectations.flatMap((group, index) => {
      const actual = segments[index] ?? '';
      return group.flatMap(({ line, expected }) => {
        const missing = misfit(expected, actual);
        return missing === undefined ? [] : [`README.md:${line} shows ${expected}\n  missing: ${missing}\n  printed: ${actual.trim()}`];
      });
    });
    expect(misfits).toEqual([]);
  }, 120_000);

  it('runs its TypeScript snippet to a clean end, printing each version it announces', async () => {
    // Prepare: the snippet as a file of its own, importing the workspace's client and zod.
    const snippet = /## Use it from TypeScript[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(snippet).toBeDefined();
    const program = (snippet ?? '')
      .replace("from '@agentstate/client'", `from '${pathToFileURL(join(root, 'packages/client/src/index.ts')).href}'`)
      .replace("from 'zod'", `from '${import.meta.resolve('zod')}'`);
    // .mts: an ES module wherever it is, so top-level await works as in the user's project.
    const file = join(scratch, 'readme-snippet.mts');
    writeFileSync(file, program);

    // Act: it must exit by itself (no live connection left open).
    const { stdout } = await run(process.execPath, ['--import', 'tsx', file], {
      cwd: root,
      env: { ...process.env, AS: api.url },
      timeout: 30_000,
    });

    // Assess
    expect(stdout).toContain("{ model: 'fast', turns: 0 }");
    expect(stdout).toMatch(/version 1: \{ model: 'fast', turns: 0 \} → \{\s*model: 'fast',\s*turns: 1,\s*lastSeen: \d{4}-/);
    expect(stdout).toMatch(/version 2: .* → .*votes: \{ search: 1 \}/s);
  }, 60_000);
});

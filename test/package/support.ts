import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { withFileLock } from '../helpers/file-lock.js';

/**
 * What the package tests do as a user would: pack a workspace as `npm publish` uploads it, and
 * type-check programs in the user's project against the installed declarations.
 */
export const run = promisify(execFile);
export const root = fileURLToPath(new URL('../../', import.meta.url));
const tsc = join(root, 'node_modules/.bin/tsc');
export const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const PACK_LOCK = join(root, 'node_modules', '.cache', 'agentstate-pack.lock');

/** The user's tsconfig: strict, NodeNext, no ambient types; `main.ts` compiled to `out/`. */
export const userTsconfig = {
  compilerOptions: {
    target: 'ES2022',
    lib: ['ES2023', 'DOM'],
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    types: [] as string[],
    outDir: 'out',
  } as Record<string, unknown>,
  include: ['main.ts'],
};

/**
 * Packs `workspace` into `destination` (prepack builds its dist/) and returns the tarball's path.
 * One pack at a time: prepack empties and rebuilds the workspace's dist/ in the repository, and
 * both package test files pack the client (the langgraph package's build reads its declarations),
 * so two workers packing at once would tar, or compile against, a half-built dist/.
 */
export async function pack(workspace: string, destination: string): Promise<string> {
  const packed = await withFileLock(PACK_LOCK, () =>
    run(npm, ['pack', '--workspace', workspace, '--pack-destination', destination, '--json', '--silent'], {
      cwd: root,
      maxBuffer: 16 * 1024 * 1024,
    }),
  );
  const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as Array<{ filename: string }>;
  return join(destination, info?.filename ?? '');
}

/** Compiles the project's `main.ts` with the project's own tsconfig.json. */
export async function compile(project: string): Promise<void> {
  await run(tsc, ['-p', '.'], { cwd: project });
}

/** Type-checks `source` as `wrong.ts` in the project: tsc's errors, or `compiled` if it passed. */
export async function typeErrorsOf(project: string, tsconfig: typeof userTsconfig, source: string): Promise<string> {
  writeFileSync(join(project, 'wrong.ts'), source);
  writeFileSync(
    join(project, 'tsconfig.wrong.json'),
    JSON.stringify({ ...tsconfig, compilerOptions: { ...tsconfig.compilerOptions, noEmit: true }, include: ['wrong.ts'] }),
  );
  return run(tsc, ['-p', 'tsconfig.wrong.json'], { cwd: project }).then(
    () => 'compiled',
    (error: { stdout?: string }) => String(error.stdout),
  );
}

import { existsSync } from 'node:fs';
import { readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Builds the inspector page (inspector/, vite) into dist/inspector when it is missing or
 * older than its sources, so that `npm install && npm start` serves it on a fresh clone and
 * after an edit, without a build step to remember and without build output in git. A build
 * takes a second or two and happens only when something changed.
 */

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
/** The page's sources and vite config. */
const inspectorSourceDir = join(repoRoot, 'inspector');
/** Where the built page goes; functions/http/handlers/inspector.ts serves it from there. */
const inspectorOutDir = join(repoRoot, 'dist', 'inspector');

export type InspectorBuild = 'fresh' | 'built' | 'unavailable';

/** Builds the page unless it is up to date; 'unavailable' when vite is not installed (`--omit=dev`). */
export async function ensureInspectorBuilt(options: { log?: (line: string) => void } = {}): Promise<InspectorBuild> {
  const log = options.log ?? ((line) => console.log(line));
  if (await isFresh()) return 'fresh';
  if (!existsSync(join(repoRoot, 'node_modules', 'vite'))) {
    log('agentstate: the inspector page is not built and vite is not installed (npm install without --omit=dev builds it)');
    return 'unavailable';
  }
  await buildInspector(inspectorOutDir);
  return 'built';
}

/**
 * Builds the page into `outDir`. The build goes to a folder of its own first and then takes
 * the place of the old one, so that a server reading the old files never sees half a build,
 * and two processes starting at once do not write into the same folder.
 */
async function buildInspector(outDir: string): Promise<void> {
  const { build } = await import('vite');
  const staging = `${outDir}.${process.pid}.tmp`;
  try {
    await build({
      configFile: join(inspectorSourceDir, 'vite.config.ts'),
      build: { outDir: staging, emptyOutDir: true },
      logLevel: 'warn',
    });
    await rm(outDir, { recursive: true, force: true });
    try {
      await rename(staging, outDir);
    } catch (error) {
      // Another process put its build there in between: from the same sources, so it will do.
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Built, and newer than every source file and the lock file (a dependency upgrade). */
async function isFresh(): Promise<boolean> {
  const built = await modifiedAt(join(inspectorOutDir, 'index.html'));
  if (built === undefined) return false;
  const sources = [join(repoRoot, 'package-lock.json'), ...(await filesUnder(inspectorSourceDir))];
  for (const file of sources) {
    const modified = await modifiedAt(file);
    if (modified !== undefined && modified > built) return false;
  }
  return true;
}

async function modifiedAt(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).mtimeMs;
  } catch {
    return undefined;
  }
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

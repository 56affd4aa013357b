import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** The module the server is started with (`--import`) to send its DynamoDB calls through a gate (iam-gate.ts). */
export const IAM_GATE_PRELOAD = fileURLToPath(new URL('./iam-gate-preload.ts', import.meta.url));

/** Where the run's bundle is, for the workers (set by global-setup.ts; unset outside vitest). */
export const SERVER_BUNDLE_VARIABLE = 'AGENTSTATE_TEST_GATED_SERVER';

/**
 * Each module keeps its own `import.meta.url`, its source file's, as under tsx: the server finds
 * docs/openapi.json, the inspector page and DynamoDB Local's jar relative to where its modules
 * are, not where the bundle happens to be written.
 */
const ownImportMetaUrl: Plugin = {
  name: 'own-import-meta-url',
  setup(onBuild) {
    onBuild.onLoad({ filter: /\.ts$/, namespace: 'file' }, async ({ path }) => {
      const source = await readFile(path, 'utf8');
      return { contents: source.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(path).href)), loader: 'ts' };
    });
  },
};

/** A run killed before its teardown leaves its folder: one a day old belongs to no run still going. */
const LEFT_AFTER_MS = 24 * 60 * 60_000;
const FOLDER_PREFIX = 'agentstate-test-server-';

function removeLeftBundles(cache: string): void {
  for (const name of readdirSync(cache)) {
    const path = join(cache, name);
    if (name.startsWith(FOLDER_PREFIX) && Date.now() - statSync(path).mtimeMs > LEFT_AFTER_MS)
      rmSync(path, { recursive: true, force: true });
  }
}

/**
 * Bundles what `startGatedServer` runs — the IAM gate's preload, then bin/start.ts — into one
 * ES module, once per test run (global-setup.ts), and returns its path and how to remove it.
 *
 * Why: under tsx every server start resolves and loads some hundreds of TypeScript modules
 * through tsx's loader thread, about 1 s of CPU of the 2 s a start costs node; the run starts
 * some 85 gated servers on two cores. The bundle is the same source through the same esbuild
 * (tsx is esbuild too), with the packages left to node as under tsx. `npm start` itself (tsx)
 * is still what every server of test/helpers/server.ts without the gate runs: start.test.ts,
 * readme.test.ts, network, CORS, on-disk and restart tests.
 */
export async function bundleGatedServer(): Promise<{ file: string; remove: () => void }> {
  // Inside the repository, so that node finds the packages left outside the bundle (ESM has
  // no NODE_PATH); a folder of its own, so that runs in parallel never share one.
  const cache = join(repoRoot, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  removeLeftBundles(cache);
  const dir = mkdtempSync(join(cache, FOLDER_PREFIX));
  const file = join(dir, 'gated-server.mjs');
  try {
    await build({
      stdin: {
        // tsx's loader is registered once the server has started (the entry's body runs after
        // bin/start.ts's last line, before any request is read): a TypeScript module worker
        // (examples/worker.ts) loads as under `npm start`, and the server's own start pays
        // tsx's hooks for none of its imports.
        contents: [
          `import ${JSON.stringify(IAM_GATE_PRELOAD)};`,
          `import ${JSON.stringify(join(repoRoot, 'bin', 'start.ts'))};`,
          `import { register } from 'tsx/esm/api';`,
          'register();',
        ].join('\n'),
        resolveDir: repoRoot,
        loader: 'ts',
      },
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      // Stack traces in a failing server's output name the TypeScript sources, as under tsx.
      sourcemap: 'inline',
      outfile: file,
      logLevel: 'warning',
      plugins: [ownImportMetaUrl],
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

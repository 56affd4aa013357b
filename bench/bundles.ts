/**
 * Section 4: bundle size and module import time of every Lambda the stack deploys, bundled as
 * lib/agent-state.ts bundles them.
 */

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { routeGroups } from '../functions/http/routes.js';
import { log, repoRoot } from './config.js';
import { kib, pad, padLeft, tableRow } from './measure.js';

export interface Bundle {
  name: string;
  bytes: number;
  gzip: number;
  withoutSdk: number;
  importMs: number;
}

const banner = "import { createRequire } from 'module'; const require = createRequire(import.meta.url);";

export async function measureBundles(): Promise<Bundle[]> {
  log('\n4. Bundle size per Lambda (esbuild, minified ESM, target node22, as lib/agent-state.ts bundles them)');
  // Every function the stack deploys: one per route group, the authorizer, the WebSocket API and
  // the change hook (lib/agent-state.ts).
  const entries = [
    ...routeGroups.map((group) => ({ name: group, file: join('functions', 'http', `${group}.ts`) })),
    { name: 'authorizer', file: join('functions', 'http', 'authorizer.ts') },
    { name: 'websocket', file: join('functions', 'ws', 'handler.ts') },
    { name: 'change-hook', file: join('functions', 'streams', 'change-hook.ts') },
  ].filter(({ file }) => existsSync(join(repoRoot, file)));
  const bundleDir = mkdtempSync(join(os.tmpdir(), 'agentstate-bench-'));
  const bundles: Bundle[] = [];
  for (const { name, file } of entries) {
    const options = {
      entryPoints: [join(repoRoot, file)],
      bundle: true,
      minify: true,
      platform: 'node' as const,
      format: 'esm' as const,
      target: 'node22',
      mainFields: ['module', 'main'],
      banner: { js: banner },
      write: false,
      logLevel: 'silent' as const,
    };
    const full = await build(options);
    const lean = await build({ ...options, external: ['@aws-sdk/*'] });
    const code = full.outputFiles?.[0]?.contents ?? new Uint8Array();
    const path = join(bundleDir, `${name}.mjs`);
    writeFileSync(path, code);
    // The module's own start-up (the INIT phase of a cold start, less the runtime's): import it
    // in a fresh node, three times, and keep the fastest.
    const importTimes = [0, 1, 2].map(() =>
      Number(
        execFileSync(
          process.execPath,
          [
            '--input-type=module',
            '-e',
            `const t = performance.now(); await import(${JSON.stringify(path)}); console.log(performance.now() - t);`,
          ],
          { env: { ...process.env, AWS_REGION: 'us-east-1' }, encoding: 'utf8' },
        ).trim(),
      ),
    );
    bundles.push({
      name,
      bytes: code.byteLength,
      gzip: gzipSync(code, { level: 9 }).byteLength,
      withoutSdk: lean.outputFiles?.[0]?.contents.byteLength ?? 0,
      importMs: Math.min(...importTimes),
    });
  }
  rmSync(bundleDir, { recursive: true, force: true });
  for (const bundle of bundles) {
    log(
      `  ${pad(bundle.name, 12)} ${padLeft(bundle.bytes.toLocaleString('en-US'), 10)} bytes ` +
        `(${kib(bundle.bytes)}, gzip ${kib(bundle.gzip)})` +
        `   without @aws-sdk/*: ${padLeft(kib(bundle.withoutSdk), 8)}   import ${bundle.importMs.toFixed(0)} ms`,
    );
  }
  return bundles;
}

export function bundleTable(bundles: Bundle[]): string {
  const lines = ['| Lambda | bytes (SDK bundled) | gzip | without `@aws-sdk/*` | module import |', '|---|---:|---:|---:|---:|'];
  for (const bundle of bundles) {
    lines.push(
      tableRow([
        bundle.name,
        bundle.bytes.toLocaleString('en-US'),
        kib(bundle.gzip),
        kib(bundle.withoutSdk),
        `${bundle.importMs.toFixed(0)} ms`,
      ]),
    );
  }
  return lines.join('\n');
}

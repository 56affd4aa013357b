import type { BuildOptions } from 'esbuild';

/** CommonJS dependencies call require(); ESM output has none unless a module makes one. */
const REQUIRE_BANNER = "import { createRequire } from 'module'; const require = createRequire(import.meta.url);";

/**
 * How every Lambda of the stack is bundled (lib/agent-state.ts), and so how the bench and the
 * bundle tests bundle it: esbuild, minified ESM for node22, the AWS SDK inside (the version
 * tested here, not the runtime's), and **split at every dynamic import**. The entry file,
 * `index.mjs`, holds what the module loads when Lambda imports it; what is imported only on
 * first use is a chunk beside it (`chunks/`), read and parsed only when it is used: the Lambda
 * client of `lambda:` workers (functions/workers/lambda-worker.ts), and the SDK's own
 * credential providers, of which a Lambda uses the environment's alone. Without splitting,
 * esbuild inlines those into the one file, and every cold start parses them.
 */
export const lambdaBundling = {
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  minify: true,
  mainFields: ['module', 'main'],
  banner: { js: REQUIRE_BANNER },
  // The packages' license notices in a file beside the bundle (`index.mjs.LEGAL.txt`, in the
  // deployment package), rather than at the end of every file a cold start reads.
  legalComments: 'external',
  // index.mjs, the file NodejsFunction's `handler: 'handler'` names (index.handler).
  entryNames: 'index',
  chunkNames: 'chunks/[name]-[hash]',
  outExtension: { '.js': '.mjs' },
} as const satisfies BuildOptions;

/** A path or flag as one word of a shell command. */
export const shellWord = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

/**
 * The esbuild command that bundles `entry` into `outdir` as `lambdaBundling` says, with source
 * maps but not the sources (stack traces map to file:line; the bundle stays small).
 */
export function lambdaBundleCommand(esbuild: string, entry: string, outdir: string): string {
  const o = lambdaBundling;
  const flags = [
    '--bundle',
    '--splitting',
    `--format=${o.format}`,
    `--platform=${o.platform}`,
    `--target=${o.target}`,
    '--minify',
    `--main-fields=${o.mainFields.join(',')}`,
    `--banner:js=${o.banner.js}`,
    `--legal-comments=${o.legalComments}`,
    `--entry-names=${o.entryNames}`,
    `--chunk-names=${o.chunkNames}`,
    ...Object.entries(o.outExtension).map(([from, to]) => `--out-extension:${from}=${to}`),
    '--sourcemap',
    '--sources-content=false',
    '--log-level=warning',
    `--outdir=${outdir}`,
  ];
  return [esbuild, entry, ...flags].map(shellWord).join(' ');
}

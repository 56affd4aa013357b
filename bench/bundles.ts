/**
 * Section 4: bundle size and module import time of every Lambda the stack deploys, bundled as
 * lib/agent-state.ts bundles them.
 */

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { routeGroups } from '../functions/http/routes.js';
import { lambdaBundling } from '../lib/bundling.js';
import { log, repoRoot } from './config.js';
import { kib, pad, padLeft, tableRow } from './measure.js';

export interface Bundle {
  name: string;
  /** A route group's function: the ones the size target is for. */
  route: boolean;
  /** What a cold start reads: index.mjs and the chunks it imports statically, the AWS SDK in them. */
  bytes: number;
  gzip: number;
  /** The other chunks, each read only when its dynamic import first runs (lib/bundling.ts). */
  chunks: number;
  /** What a cold start reads with `@aws-sdk/*` left out: what the size target is about. */
  withoutSdk: number;
  /** Of `withoutSdk`: what Powertools' Tracer brings in (the X-Ray SDK, its semver and cls-hooked, the Tracer). */
  tracing: number;
  /** Of `withoutSdk` less tracing: KiB by package (or by folder of our own code), largest first. */
  rest: Array<{ module: string; bytes: number }>;
  importMs: number;
}

/** The packages behind X-Ray tracing: CommonJS, so esbuild keeps them whole. */
const TRACING_PACKAGES =
  /node_modules\/(aws-xray-sdk-core|semver|cls-hooked|emitter-listener|shimmer|async-hook-jl|stack-chain|@aws-lambda-powertools\/tracer)\//;

/** Issue 20's targets for a route bundle (minified, `@aws-sdk/*` left out) and for every module's import. */
const BUNDLE_TARGETS = { routeKiB: 150, importMs: 50 } as const;

interface DeployedFunction {
  name: string;
  file: string;
}

/**
 * Every function the stack deploys (lib/agent-state.ts): one per route group, the authorizer,
 * the WebSocket API, the two stream consumers (each an entry of its own), and the webhook
 * queue's delivery hook. test/infra/bench-functions.test.ts holds this list to the
 * synthesized stack, so a function added there without a row here fails `npm test`.
 */
export const deployedFunctions: readonly DeployedFunction[] = [
  ...routeGroups.map((group) => ({ name: group, file: join('functions', 'http', `${group}.ts`) })),
  { name: 'authorizer', file: join('functions', 'http', 'authorizer.ts') },
  { name: 'websocket', file: join('functions', 'ws', 'handler.ts') },
  { name: 'change-hook', file: join('functions', 'streams', 'change-hook.ts') },
  { name: 'webhook-hook', file: join('functions', 'streams', 'webhook-hook.ts') },
  { name: 'delivery-hook', file: join('functions', 'streams', 'delivery-hook.ts') },
];

/** A package (`@scope/name`) or, for our own code, its folder (`functions/store`). */
function moduleOf(input: string): string {
  const packages = [...input.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)/g)];
  const last = packages.at(-1);
  if (last?.[1]) return last[1];
  return input.replace(/\/[^/]+$/, '');
}

/**
 * What a cold start reads of a split build: `index.mjs` and every chunk it imports statically,
 * however deep (code that a lazily loaded chunk shares with the entry is such a chunk). The
 * other chunks are read only when their dynamic import first runs.
 */
function coldStartOutputs(metafile: Metafile): string[] {
  const entry = Object.entries(metafile.outputs).find(([path, output]) => output.entryPoint !== undefined && path.endsWith('index.mjs'));
  if (!entry) throw new Error('the build has no index.mjs');
  const read = new Set([entry[0]]);
  const pending = [entry[0]];
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    for (const imported of metafile.outputs[path]?.imports ?? []) {
      if (imported.kind === 'import-statement' && imported.path in metafile.outputs && !read.has(imported.path)) {
        read.add(imported.path);
        pending.push(imported.path);
      }
    }
  }
  return [...read];
}

export async function measureBundles(): Promise<Bundle[]> {
  log('\n4. Bundle size per Lambda (esbuild, minified ESM, target node22, split, as lib/agent-state.ts bundles them)');
  const entries = deployedFunctions.filter(({ file }) => existsSync(join(repoRoot, file)));
  const bundleDir = mkdtempSync(join(os.tmpdir(), 'agentstate-bench-'));
  const bundles: Bundle[] = [];
  for (const { name, file } of entries) {
    const outdir = join(bundleDir, name);
    const options = {
      ...lambdaBundling,
      entryPoints: [join(repoRoot, file)],
      absWorkingDir: repoRoot,
      metafile: true as const,
      logLevel: 'silent' as const,
    };
    const full = await build({ ...options, outdir, write: true });
    const lean = await build({ ...options, outdir: join(bundleDir, `${name}-lean`), write: false, external: ['@aws-sdk/*'] });
    const fullRead = coldStartOutputs(full.metafile);
    const code = Buffer.concat(fullRead.map((output) => readFileSync(join(repoRoot, output))));
    const leanRead = coldStartOutputs(lean.metafile);
    const inputs = leanRead.flatMap((output) => Object.entries(lean.metafile.outputs[output]?.inputs ?? {}));
    const rest = new Map<string, number>();
    for (const [input, { bytesInOutput }] of inputs) {
      if (!TRACING_PACKAGES.test(input)) rest.set(moduleOf(input), (rest.get(moduleOf(input)) ?? 0) + bytesInOutput);
    }
    // The module's own start-up (the INIT phase of a cold start, less the runtime's): import it
    // in a fresh node, three times, and keep the fastest.
    const path = join(outdir, 'index.mjs');
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
      route: (routeGroups as readonly string[]).includes(name),
      bytes: code.byteLength,
      gzip: gzipSync(code, { level: 9 }).byteLength,
      chunks: Object.entries(full.metafile.outputs)
        .filter(([output]) => !fullRead.includes(output) && output.endsWith('.mjs'))
        .reduce((sum, [, output]) => sum + output.bytes, 0),
      withoutSdk: leanRead.reduce((sum, output) => sum + (lean.metafile.outputs[output]?.bytes ?? 0), 0),
      tracing: inputs.filter(([input]) => TRACING_PACKAGES.test(input)).reduce((sum, [, input]) => sum + input.bytesInOutput, 0),
      rest: [...rest].map(([module, bytes]) => ({ module, bytes })).sort((a, b) => b.bytes - a.bytes),
      importMs: Math.min(...importTimes),
    });
  }
  rmSync(bundleDir, { recursive: true, force: true });
  for (const bundle of bundles) {
    log(
      `  ${pad(bundle.name, 14)} ${padLeft(bundle.bytes.toLocaleString('en-US'), 10)} bytes ` +
        `(${kib(bundle.bytes)}, gzip ${kib(bundle.gzip)}, chunks ${kib(bundle.chunks)})` +
        `   without @aws-sdk/*: ${padLeft(kib(bundle.withoutSdk), 8)} (tracing ${padLeft(kib(bundle.tracing), 7)})   import ${bundle.importMs.toFixed(0)} ms`,
    );
  }
  return bundles;
}

/**
 * How far a measurement is over its target, as the table shows it (whole KiB and ms): `met`,
 * or `+12 KiB` / `+3 ms`; `—` where no target applies.
 */
function againstTarget(value: number, target: number | undefined, unit: string): string {
  if (target === undefined) return '—';
  const over = Math.round(value) - target;
  return over <= 0 ? 'met' : `+${over} ${unit}`;
}

function bundleTable(bundles: Bundle[]): string {
  const lines = [
    `| Lambda | bytes read at cold start (SDK bundled) | gzip | without \`@aws-sdk/*\` | of which tracing | over ${BUNDLE_TARGETS.routeKiB} KiB | module import | over ${BUNDLE_TARGETS.importMs} ms |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const bundle of bundles) {
    lines.push(
      tableRow([
        bundle.name,
        bundle.bytes.toLocaleString('en-US'),
        kib(bundle.gzip),
        kib(bundle.withoutSdk),
        kib(bundle.tracing),
        againstTarget(bundle.withoutSdk / 1024, bundle.route ? BUNDLE_TARGETS.routeKiB : undefined, 'KiB'),
        `${bundle.importMs.toFixed(0)} ms`,
        againstTarget(bundle.importMs, BUNDLE_TARGETS.importMs, 'ms'),
      ]),
    );
  }
  return lines.join('\n');
}

/** What a keyed group's bundle holds besides the X-Ray SDK, by kind, in KiB. */
function restByKind(bundle: Bundle): { ours: number; powertools: number; zod: number; others: Array<{ module: string; bytes: number }> } {
  const kinds = { ours: 0, powertools: 0, zod: 0 };
  const others: Array<{ module: string; bytes: number }> = [];
  for (const part of bundle.rest) {
    if (/^(functions|lib)\//.test(part.module)) kinds.ours += part.bytes;
    else if (part.module.startsWith('@aws-lambda-powertools/')) kinds.powertools += part.bytes;
    else if (part.module === 'zod') kinds.zod += part.bytes;
    else others.push(part);
  }
  return { ...kinds, others };
}

/** Per keyed route group: where its bytes without the SDK go, and what is left over 150 KiB once tracing is set apart. */
function shortfallTable(routes: Bundle[]): string {
  const lines = [
    `| route group | without \`@aws-sdk/*\` | tracing | our code | Powertools Logger, Metrics, commons | zod | other packages (largest) | over ${BUNDLE_TARGETS.routeKiB} KiB without tracing |`,
    '|---|---:|---:|---:|---:|---:|---|---:|',
  ];
  for (const bundle of routes) {
    const rest = restByKind(bundle);
    const largest = rest.others
      .slice(0, 3)
      .map((part) => `${part.module} ${kib(part.bytes)}`)
      .join(', ');
    lines.push(
      tableRow([
        bundle.name,
        kib(bundle.withoutSdk),
        kib(bundle.tracing),
        kib(rest.ours),
        kib(rest.powertools),
        kib(rest.zod),
        largest || '—',
        againstTarget((bundle.withoutSdk - bundle.tracing) / 1024, BUNDLE_TARGETS.routeKiB, 'KiB'),
      ]),
    );
  }
  return lines.join('\n');
}

/** Section 4 of the page: what each function carries, against issue 20's targets, and why a miss is one. */
export function bundleSection(bundles: Bundle[]): string {
  const routes = bundles.filter((bundle) => bundle.route && bundle.name !== 'health' && bundle.name !== 'inspector');
  const kibOf = (bytes: number) => Math.round(bytes / 1024);
  const range = (values: number[]) => `${Math.min(...values)}–${Math.max(...values)}`;
  const over = routes.map((bundle) => kibOf(bundle.withoutSdk) - BUNDLE_TARGETS.routeKiB);
  const untraced = routes.map((bundle) => kibOf(bundle.withoutSdk - bundle.tracing));
  const slow = bundles.filter((bundle) => Math.round(bundle.importMs) > BUNDLE_TARGETS.importMs).map((bundle) => bundle.name);
  return `## Bundle size per Lambda

Each function of the stack (a \`functions/http/<group>.ts\` per route group, the authorizer,
the WebSocket handler, the change hook and the webhook hook, each an entry of its own, and the
webhook queue's delivery hook) bundled
as lib/agent-state.ts bundles it for deployment: esbuild, minified ESM, target node22, AWS SDK
v3 bundled (\`bundleAwsSDK: true\`: the SDK version tested here, not the runtime's). "Without
\`@aws-sdk/*\`" is the same bundle with the SDK left to the runtime, the size issue 20's target
of ${BUNDLE_TARGETS.routeKiB} KiB per route bundle is about; "of which tracing" is the part of it that X-Ray
tracing brings in. "Module import" is the time a fresh node takes to import the bundle, the
module part of a cold start's INIT phase (best of three), against the target of ${BUNDLE_TARGETS.importMs} ms.

Each route group's function builds and bundles only the services its routes use
(functions/http/parts/, docs/architecture.md "What each function builds"): the Lambda client
and the worker call only in decide, the memory store only in memory, the webhook store and
sender only in webhooks; test/unit/bundle-contents.test.ts fails when a group carries a
module its routes do not use. The request schemas are written with zod/mini, whose checks
tree-shake: a group carries 13–26 KiB of zod instead of the 74–92 KiB of classic zod.
\`health\` and \`inspector\` need no key and no table, so they carry neither the services nor
the SDK nor zod (functions/http/public.ts), and \`health\` reads the OpenAPI document it serves
from a copy the stack puts beside its bundle (140 KiB that \`/health\` never needs).

**Loaded on first use.** Each function is bundled with esbuild's code splitting
(lib/bundling.ts, the same options for the stack, this section and the bundle tests), so what
only some requests need is a chunk beside \`index.mjs\` that node reads when it is first
imported: decide's Lambda client (only \`lambda:\` workers call it), the KMS client of the
sealing key, the SDK's credential providers other than the environment's, and the table's API
key store (behind the authorizer no route group looks a key up). The sizes below are of what a
cold start reads: \`index.mjs\` and the chunks it imports statically (esbuild puts the code
that a lazy chunk shares with the entry in such a chunk); test/unit/bundle-contents.test.ts
fails when a cold start loads one of the lazy parts again.

**Where the keyed route groups miss ${BUNDLE_TARGETS.routeKiB} KiB** (by ${range(over)} KiB): tracing first.
Every function runs with active X-Ray tracing and Powertools' Tracer (DESIGN.md: Powertools
for traces), which loads the X-Ray SDK (aws-xray-sdk-core) with semver and cls-hooked:
CommonJS, which esbuild keeps whole. Without it the groups would measure ${range(untraced)} KiB.
What the rest is, per group (no package is bundled twice, in two versions or as both CommonJS
and ESM):

${shortfallTable(routes)}

Our own code is the services a group's routes use, over the store's codecs and the outbound
rules, the most in decide (the worker call). Traced handlers and SDK calls are worth more than
those bytes, which a cold start pays mostly as import time: the last column of the table
below.${
    slow.length > 0
      ? ` Over ${BUNDLE_TARGETS.importMs} ms in this run: ${slow.join(', ')}. Most of an import is the AWS SDK's
DynamoDB client and the X-Ray SDK, both needed by the first request.`
      : ` Every function imports within ${BUNDLE_TARGETS.importMs} ms in this run.`
  }

**The planners' choice.** The size target cannot be met while every function carries the X-Ray
SDK, and the last column of the table above is what stays over without it. Two ways out,
neither taken here: the Powertools Lambda layer, which moves Powertools and
the X-Ray SDK out of the bundle but not out of the cold start (the layer is read at INIT
too); or tracing without the X-Ray SDK (OpenTelemetry through the ADOT layer, or traces only at
the edges: API Gateway's and Lambda's own segments, with no subsegment per DynamoDB call).

${bundleTable(bundles)}
`;
}

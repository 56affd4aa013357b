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
import { deployedEntries } from '../lib/entries.js';
import { log, repoRoot } from './config.js';
import { kib, pad, padLeft, tableRow } from './measure.js';

export interface Bundle {
  name: string;
  /** A route group's function: the ones the size target is for. */
  route: boolean;
  /** What a cold start reads at the default tracing level: index.mjs and the chunks it imports statically, the AWS SDK in them. */
  bytes: number;
  gzip: number;
  /** The other chunks, each read only when its dynamic import first runs (lib/bundling.ts). */
  chunks: number;
  /** What a cold start reads with `@aws-sdk/*` left out: what the size target is about. */
  withoutSdk: number;
  /** Of `withoutSdk`: KiB by package (or by folder of our own code), largest first. */
  rest: Array<{ module: string; bytes: number }>;
  importMs: number;
  /**
   * What the `detailed` tracing level adds to a cold start (`@aws-sdk/*` left out): the chunk
   * of Powertools' Tracer and the X-Ray SDK, which the function imports at INIT at that level
   * (functions/telemetry/telemetry.ts), and the module import then. Zero and the same import
   * for a function with no telemetry (health, inspector).
   */
  detailed: { bytes: number; importMs: number };
}

/** Our module that imports Powertools' Tracer, and with it the X-Ray SDK: a chunk of its own. */
const DETAILED_TRACING = 'functions/telemetry/detailed-tracing.ts';

/** Issue 20's targets for a route bundle (minified, `@aws-sdk/*` left out) and for every module's import. */
const BUNDLE_TARGETS = { routeKiB: 150, importMs: 50 } as const;

/** A package (`@scope/name`) or, for our own code, its folder (`functions/store`). */
function moduleOf(input: string): string {
  const packages = [...input.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)/g)];
  const last = packages.at(-1);
  if (last?.[1]) return last[1];
  return input.replace(/\/[^/]+$/, '');
}

/** `starts` and every output they import statically, however deep. */
function staticClosure(metafile: Metafile, starts: readonly string[]): Set<string> {
  const read = new Set(starts);
  const pending = [...starts];
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    for (const imported of metafile.outputs[path]?.imports ?? []) {
      if (imported.kind === 'import-statement' && imported.path in metafile.outputs && !read.has(imported.path)) {
        read.add(imported.path);
        pending.push(imported.path);
      }
    }
  }
  return read;
}

/**
 * What a cold start reads of a split build: `index.mjs` and every chunk it imports statically,
 * however deep (code that a lazily loaded chunk shares with the entry is such a chunk). The
 * other chunks are read only when their dynamic import first runs.
 */
function coldStartOutputs(metafile: Metafile): string[] {
  const entry = Object.entries(metafile.outputs).find(([path, output]) => output.entryPoint !== undefined && path.endsWith('index.mjs'));
  if (!entry) throw new Error('the build has no index.mjs');
  return [...staticClosure(metafile, [entry[0]])];
}

/** What the `detailed` tracing level reads at INIT besides `coldStart`: the tracer's chunk and what only it imports. */
function detailedTracingOutputs(metafile: Metafile, coldStart: readonly string[]): string[] {
  const tracer = Object.keys(metafile.outputs).filter((path) => (metafile.outputs[path]?.inputs[DETAILED_TRACING]?.bytesInOutput ?? 0) > 0);
  if (tracer.length === 0) return [];
  return [...staticClosure(metafile, [...coldStart, ...tracer])].filter((path) => !coldStart.includes(path));
}

/**
 * The module's own start-up (the INIT phase of a cold start, less the runtime's): import it in
 * a fresh node, at a tracing level, three times, and keep the fastest.
 */
function importMs(path: string, tracing: 'lambda' | 'detailed'): number {
  const times = [0, 1, 2].map(() =>
    Number(
      execFileSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `const t = performance.now(); await import(${JSON.stringify(path)}); console.log(performance.now() - t);`,
        ],
        { env: { ...process.env, AWS_REGION: 'us-east-1', AGENTSTATE_TRACING: tracing }, encoding: 'utf8' },
      ).trim(),
    ),
  );
  return Math.min(...times);
}

export async function measureBundles(): Promise<Bundle[]> {
  log('\n4. Bundle size per Lambda (esbuild, minified ESM, target node22, split, as lib/agent-state.ts bundles them)');
  const entries = deployedEntries.filter(({ file }) => existsSync(join(repoRoot, file)));
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
    const rest = new Map<string, number>();
    for (const output of leanRead) {
      for (const [input, { bytesInOutput }] of Object.entries(lean.metafile.outputs[output]?.inputs ?? {})) {
        rest.set(moduleOf(input), (rest.get(moduleOf(input)) ?? 0) + bytesInOutput);
      }
    }
    const path = join(outdir, 'index.mjs');
    bundles.push({
      name,
      route: (routeGroups as readonly string[]).includes(name),
      bytes: code.byteLength,
      gzip: gzipSync(code, { level: 9 }).byteLength,
      chunks: Object.entries(full.metafile.outputs)
        .filter(([output]) => !fullRead.includes(output) && output.endsWith('.mjs'))
        .reduce((sum, [, output]) => sum + output.bytes, 0),
      withoutSdk: leanRead.reduce((sum, output) => sum + (lean.metafile.outputs[output]?.bytes ?? 0), 0),
      rest: [...rest].map(([module, bytes]) => ({ module, bytes })).sort((a, b) => b.bytes - a.bytes),
      importMs: importMs(path, 'lambda'),
      detailed: {
        bytes: detailedTracingOutputs(lean.metafile, leanRead).reduce(
          (sum, output) => sum + (lean.metafile.outputs[output]?.bytes ?? 0),
          0,
        ),
        importMs: importMs(path, 'detailed'),
      },
    });
  }
  rmSync(bundleDir, { recursive: true, force: true });
  for (const bundle of bundles) {
    log(
      `  ${pad(bundle.name, 14)} ${padLeft(bundle.bytes.toLocaleString('en-US'), 10)} bytes ` +
        `(${kib(bundle.bytes)}, gzip ${kib(bundle.gzip)}, chunks ${kib(bundle.chunks)})` +
        `   without @aws-sdk/*: ${padLeft(kib(bundle.withoutSdk), 8)}   import ${bundle.importMs.toFixed(0)} ms` +
        `   detailed tracing: +${kib(bundle.detailed.bytes)}, import ${bundle.detailed.importMs.toFixed(0)} ms`,
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
    `| Lambda | bytes read at cold start (SDK bundled) | gzip | without \`@aws-sdk/*\` | over ${BUNDLE_TARGETS.routeKiB} KiB | module import | over ${BUNDLE_TARGETS.importMs} ms | \`detailed\` tracing: more at INIT | \`detailed\`: module import |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const bundle of bundles) {
    lines.push(
      tableRow([
        bundle.name,
        bundle.bytes.toLocaleString('en-US'),
        kib(bundle.gzip),
        kib(bundle.withoutSdk),
        againstTarget(bundle.withoutSdk / 1024, bundle.route ? BUNDLE_TARGETS.routeKiB : undefined, 'KiB'),
        `${bundle.importMs.toFixed(0)} ms`,
        againstTarget(bundle.importMs, BUNDLE_TARGETS.importMs, 'ms'),
        bundle.detailed.bytes > 0 ? `+${kib(bundle.detailed.bytes)}` : '—',
        `${bundle.detailed.importMs.toFixed(0)} ms`,
      ]),
    );
  }
  return lines.join('\n');
}

/** What a keyed group's cold start reads (SDK left out), by kind, in KiB. */
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

/** Per keyed route group: where its bytes without the SDK go, against 150 KiB. */
function shortfallTable(routes: Bundle[]): string {
  const lines = [
    `| route group | without \`@aws-sdk/*\` | our code | Powertools Logger, Metrics, commons | zod | other packages (largest) | over ${BUNDLE_TARGETS.routeKiB} KiB |`,
    '|---|---:|---:|---:|---:|---|---:|',
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
        kib(rest.ours),
        kib(rest.powertools),
        kib(rest.zod),
        largest || '—',
        againstTarget(bundle.withoutSdk / 1024, BUNDLE_TARGETS.routeKiB, 'KiB'),
      ]),
    );
  }
  return lines.join('\n');
}

/**
 * Why the groups that miss the size target miss it (as measured when the cuts stopped, session 5),
 * and what was and was not cut.
 */
const MISSES = `Every keyed group pays for packages it needs on every request (Powertools'
Logger and Metrics with their commons, zod's checks: the columns above; the verbatim JSON
numbers of lossless-json, 8 KiB; uuidv7 and middy), and a group whose routes read sessions for
the session log (the store's log, paths, node index and codecs: the 26 KiB the agents group
left behind).
\`decide\` adds what only it does, and does on every request: the decision (decide-service.ts,
the answer's checks, the lease), the worker call with its signatures and the outbound rules
that keep a worker's address public (call-worker.ts, outbound.ts), and the agent registry the
worker is read from. Every decision runs the decision and reads the registry, and an https
worker, the common kind, takes the signed call and the outbound rules on every decision (the
Lambda client of a \`lambda:\` worker is already a chunk): made lazy, they would only move
their cost from INIT to the first decision. What would bring decide under is fewer bytes in
what every group shares (the session log's codecs, Powertools), not a cut of its own.`;

/** Section 4 of the page: what each function carries, against issue 20's targets, and why a miss is one. */
export function bundleSection(bundles: Bundle[]): string {
  const routes = bundles.filter((bundle) => bundle.route && bundle.name !== 'health' && bundle.name !== 'inspector');
  const kibOf = (bytes: number) => Math.round(bytes / 1024);
  const range = (values: number[]) =>
    Math.min(...values) === Math.max(...values) ? `${values[0]}` : `${Math.min(...values)}–${Math.max(...values)}`;
  const missing = routes.filter((bundle) => kibOf(bundle.withoutSdk) > BUNDLE_TARGETS.routeKiB);
  const slow = bundles.filter((bundle) => Math.round(bundle.importMs) > BUNDLE_TARGETS.importMs).map((bundle) => bundle.name);
  const traced = routes.map((bundle) => kibOf(bundle.detailed.bytes));
  const tracedImport = routes.map((bundle) => Math.round(bundle.detailed.importMs - bundle.importMs));
  return `## Bundle size per Lambda

Each function of the stack (lib/entries.ts: a \`functions/http/<group>.ts\` per route group,
the authorizer, the WebSocket handler, the change hook and the webhook hook, and the webhook
queue's delivery hook) bundled as lib/agent-state.ts bundles it for deployment: esbuild,
minified ESM, target node22, AWS SDK v3 bundled (\`bundleAwsSDK: true\`: the SDK version
tested here, not the runtime's), split at dynamic imports. "Without \`@aws-sdk/*\`" is what the
same cold start reads with the SDK left to the runtime, the size issue 20's target of
${BUNDLE_TARGETS.routeKiB} KiB per route bundle is about. "Module import" is the time a fresh node takes to
import the bundle, the module part of a cold start's INIT phase (best of three), against the
target of ${BUNDLE_TARGETS.importMs} ms. Both are at the default tracing level; the last two columns are what
the \`detailed\` level costs instead.

**Tracing is a deploy setting** (docs/deploy.md, "Tracing"). By default (\`lambda\`) Lambda's
active tracing records each sampled invocation (its initialization, invocation and overhead)
and the function loads no X-Ray SDK. At \`detailed\` the function also imports Powertools'
Tracer at INIT (functions/telemetry/detailed-tracing.ts, a chunk of its own), for a
subsegment around the handler and one per AWS SDK call and outbound request: the X-Ray SDK
(aws-xray-sdk-core, with semver and cls-hooked, CommonJS that esbuild keeps whole) is
+${range(traced)} KiB for a keyed group's cold start to read, and +${range(tracedImport)} ms of module import in this
run. The size target is for the default; \`detailed\` misses it by that much on purpose, and
pays it during INIT, not on the first request. test/unit/bundle-contents.test.ts fails when a
default cold start loads the tracer again.

Each route group's function builds and bundles only the services its routes use
(functions/http/parts/, docs/architecture.md "What each function builds"): the Lambda client
and the worker call only in decide, the memory store only in memory, the webhook store and
sender only in webhooks; test/unit/bundle-contents.test.ts fails when a group carries a
module its routes do not use. The sessions and tree groups build the session service without
the state's writes and versions (functions/core/session-tree-service.ts; session-service.ts
adds them for the state group), so JSON Patch, merge patch and typed-field writes are in the
state group's bundle only. The request schemas are written with zod/mini, whose checks
tree-shake. \`health\` and \`inspector\` need no key and no table, so they carry neither the
services nor the SDK nor zod (functions/http/public.ts), and \`health\` reads the OpenAPI
document it serves from a copy the stack puts beside its bundle (140 KiB that \`/health\`
never needs).

**Loaded on first use.** What only some requests need is a chunk beside \`index.mjs\` that
node reads when it is first imported (lib/bundling.ts): decide's Lambda client (only
\`lambda:\` workers call it), the KMS client of the sealing key, the SDK's credential
providers other than the environment's, the table's API key store (behind the authorizer no
route group looks a key up), a session's delete (a \`DELETE\`, or a write that finds a delete
abandoned), zod's English messages (a refused body), and in \`agents\` the session store (read
only to check a field's type change). Nothing that nearly every request of a group uses is
loaded so: that would only move its cost from INIT to the first request. The sizes below are of
what a cold start reads: \`index.mjs\` and the chunks it imports statically (esbuild puts the
code that a lazy chunk shares with the entry in such a chunk); test/unit/bundle-contents.test.ts
fails when a cold start loads one of the lazy parts again.

**What a keyed group's cold start reads**, without the SDK (no package is bundled twice, in
two versions or as both CommonJS and ESM):

${shortfallTable(routes)}

${
  missing.length > 0
    ? `**Where a keyed group still misses ${BUNDLE_TARGETS.routeKiB} KiB** in this run: ${missing.map((bundle) => `${bundle.name} (+${kibOf(bundle.withoutSdk) - BUNDLE_TARGETS.routeKiB} KiB)`).join(', ')}. ${MISSES}`
    : `Every keyed route group is within ${BUNDLE_TARGETS.routeKiB} KiB in this run.`
}${
  slow.length > 0
    ? ` Over ${BUNDLE_TARGETS.importMs} ms of import in this run: ${slow.join(', ')}. Most of an import is the AWS SDK's
DynamoDB client, which the first request needs.`
    : ` Every function imports within ${BUNDLE_TARGETS.importMs} ms in this run.`
}

${bundleTable(bundles)}
`;
}

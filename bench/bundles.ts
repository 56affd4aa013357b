/**
 * Section 4: bundle size and module import time of every Lambda the stack deploys, bundled as
 * lib/agent-state.ts bundles them.
 */

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { routeGroups } from '../functions/http/contract/routes.js';
import { lambdaBundling } from '../lib/bundling.js';
import { deployedEntries } from '../lib/entries.js';
import { log, QUICK, repoRoot } from './config.js';
import { kib, median, pad, padLeft, percentile, tableRow } from './measure.js';

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
  /** Its module import at the default tracing level. */
  imported: ImportTime;
  /**
   * What the `detailed` tracing level adds to a cold start (`@aws-sdk/*` left out): the chunk
   * of Powertools' Tracer and the X-Ray SDK, which the function imports at INIT at that level
   * (functions/telemetry/telemetry.ts), and the module import then. Zero and the same import
   * for a function with no telemetry (health, inspector).
   */
  detailed: { bytes: number; imported: ImportTime };
}

/** Section 4's measurements: every function, and the AWS SDK's DynamoDB client imported alone. */
export interface BundleRun {
  bundles: Bundle[];
  /** The DynamoDB client and the document client's commands that the store imports, bundled the same way, alone. */
  sdkClient: ImportTime;
  /**
   * What Lambda's runtime loads before it imports the handler (`RUNTIME_STAND_IN`), imported
   * into a bare node: what the import column no longer counts.
   */
  runtime: ImportTime;
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

/** How many fresh imports of each bundle, at each tracing level, the import columns are the median of. */
const IMPORT_ROUNDS = QUICK ? 5 : 11;

/** A module import in a fresh node: wall time, and the CPU time (user and system, every thread) it took. */
interface ImportSample {
  wallMs: number;
  cpuMs: number;
}

/** The median of fresh imports of one bundle, and their spread (the middle half of them). */
export interface ImportTime {
  wallMs: number;
  /** The 25th and 75th percentile of the wall times. */
  wallSpread: readonly [number, number];
  cpuMs: number;
  samples: number;
}

/**
 * What a fresh node imports, at a tracing level: a bundle's `index.mjs` as Lambda's runtime
 * imports a handler (`afterRuntime`), or a module with nothing loaded before it.
 */
interface ImportTarget {
  path: string;
  tracing: 'lambda' | 'detailed';
  afterRuntime: boolean;
}

/**
 * What Lambda's Node.js runtime has loaded when it imports the handler, and so what a cold
 * start's import of our module does not pay for: the runtime starts node on an ES module file
 * of its own (`/var/runtime/index.mjs`, so node's loader of module files is already set up) and
 * loads `node:http` through `createRequire` for its client of the Runtime API, before it calls
 * `await import()` on the handler (aws-lambda-nodejs-runtime-interface-client, src/index.mjs and
 * src/client/rapid-client.ts). This file does the same, then imports the module it is given and
 * prints how long that import alone took.
 */
const RUNTIME_STAND_IN = `import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
createRequire(import.meta.url)('node:http');
const cpu = process.cpuUsage();
const started = performance.now();
await import(pathToFileURL(process.argv[2]).href);
const wallMs = performance.now() - started;
const used = process.cpuUsage(cpu);
console.log(JSON.stringify({ wallMs, cpuMs: (used.user + used.system) / 1000 }));
`;

/**
 * A module's own start-up (the INIT phase of a cold start, less the runtime's): in a fresh node,
 * after what the runtime loads first (`RUNTIME_STAND_IN`, written to `standIn`) or with nothing
 * before it, the import alone, by the wall clock and by the process's CPU time, which load on
 * the machine inflates less.
 */
function importOnce({ path, tracing, afterRuntime }: ImportTarget, standIn: string): ImportSample {
  const env = { ...process.env, AWS_REGION: 'us-east-1', AGENTSTATE_TRACING: tracing };
  const script = [
    'const cpu = process.cpuUsage();',
    'const started = performance.now();',
    `await import(${JSON.stringify(pathToFileURL(path).href)});`,
    'const wallMs = performance.now() - started;',
    'const used = process.cpuUsage(cpu);',
    'console.log(JSON.stringify({ wallMs, cpuMs: (used.user + used.system) / 1000 }));',
  ].join(' ');
  const args = afterRuntime ? [standIn, path] : ['--input-type=module', '-e', script];
  const output = execFileSync(process.execPath, args, { env, encoding: 'utf8' });
  return JSON.parse(output.trim()) as ImportSample;
}

/**
 * Import times of every target, `IMPORT_ROUNDS` fresh imports each, interleaved: each round
 * imports every target once, in an order that moves one place each round, so that a burst of
 * load on the machine falls on all of them alike rather than on one bundle's samples.
 */
function importTimes(targets: readonly ImportTarget[], standIn: string): ImportTime[] {
  const samples = targets.map((): ImportSample[] => []);
  for (let round = 0; round < IMPORT_ROUNDS; round++) {
    for (let step = 0; step < targets.length; step++) {
      const index = (step + round) % targets.length;
      samples[index]?.push(importOnce(targets[index] as ImportTarget, standIn));
    }
  }
  return samples.map((taken) => {
    const wall = taken.map((sample) => sample.wallMs);
    return {
      wallMs: median(wall),
      wallSpread: [percentile(wall, 25), percentile(wall, 75)] as const,
      cpuMs: median(taken.map((sample) => sample.cpuMs)),
      samples: taken.length,
    };
  });
}

/**
 * The part of the AWS SDK that every keyed function imports at cold start, as an entry of its
 * own: the DynamoDB client, the document client and its commands, `unmarshall`.
 */
const SDK_CLIENT_ENTRY = `export { DynamoDBClient } from '@aws-sdk/client-dynamodb';
export { BatchGetCommand, BatchWriteCommand, DeleteCommand, DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
export { unmarshall } from '@aws-sdk/util-dynamodb';`;

export async function measureBundles(): Promise<BundleRun> {
  log('\n4. Bundle size per Lambda (esbuild, minified ESM, target node22, split, as lib/agent-state.ts bundles them)');
  const entries = deployedEntries.filter(({ file }) => existsSync(join(repoRoot, file)));
  const bundleDir = mkdtempSync(join(os.tmpdir(), 'agentstate-bench-'));
  const sized: Array<Omit<Bundle, 'imported' | 'detailed'> & { detailedBytes: number; path: string }> = [];
  const common = { ...lambdaBundling, absWorkingDir: repoRoot, metafile: true as const, logLevel: 'silent' as const };
  for (const { name, file } of entries) {
    const outdir = join(bundleDir, name);
    const options = { ...common, entryPoints: [join(repoRoot, file)] };
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
    sized.push({
      name,
      route: (routeGroups as readonly string[]).includes(name),
      bytes: code.byteLength,
      gzip: gzipSync(code, { level: 9 }).byteLength,
      chunks: Object.entries(full.metafile.outputs)
        .filter(([output]) => !fullRead.includes(output) && output.endsWith('.mjs'))
        .reduce((sum, [, output]) => sum + output.bytes, 0),
      withoutSdk: leanRead.reduce((sum, output) => sum + (lean.metafile.outputs[output]?.bytes ?? 0), 0),
      rest: [...rest].map(([module, bytes]) => ({ module, bytes })).sort((a, b) => b.bytes - a.bytes),
      detailedBytes: detailedTracingOutputs(lean.metafile, leanRead).reduce(
        (sum, output) => sum + (lean.metafile.outputs[output]?.bytes ?? 0),
        0,
      ),
      path: join(outdir, 'index.mjs'),
    });
  }
  const sdkDir = join(bundleDir, 'sdk-client');
  await build({ ...common, stdin: { contents: SDK_CLIENT_ENTRY, resolveDir: repoRoot, sourcefile: 'sdk-client.mjs' }, outdir: sdkDir });

  // Every import of every bundle, at both levels, and of the SDK alone, interleaved in one run.
  const standIn = join(bundleDir, 'runtime-stand-in.mjs');
  writeFileSync(standIn, RUNTIME_STAND_IN);
  // What the runtime loads before the handler, as a module of its own imported into a bare node.
  const runtimeLoads = join(bundleDir, 'runtime-loads.mjs');
  writeFileSync(runtimeLoads, "import { createRequire } from 'node:module';\ncreateRequire(import.meta.url)('node:http');\n");
  const targets: ImportTarget[] = [
    ...sized.flatMap(({ path }) => [
      { path, tracing: 'lambda' as const, afterRuntime: true },
      { path, tracing: 'detailed' as const, afterRuntime: true },
    ]),
    { path: join(sdkDir, 'index.mjs'), tracing: 'lambda', afterRuntime: true },
    { path: runtimeLoads, tracing: 'lambda', afterRuntime: false },
  ];
  const times = importTimes(targets, standIn);
  rmSync(bundleDir, { recursive: true, force: true });
  const bundles: Bundle[] = sized.map(({ detailedBytes, path: _path, ...bundle }, index) => ({
    ...bundle,
    imported: times[2 * index] as ImportTime,
    detailed: { bytes: detailedBytes, imported: times[2 * index + 1] as ImportTime },
  }));
  const sdkClient = times[times.length - 2] as ImportTime;
  const runtime = times[times.length - 1] as ImportTime;
  for (const bundle of bundles) {
    log(
      `  ${pad(bundle.name, 14)} ${padLeft(bundle.bytes.toLocaleString('en-US'), 10)} bytes ` +
        `(${kib(bundle.bytes)}, gzip ${kib(bundle.gzip)}, chunks ${kib(bundle.chunks)})` +
        `   without @aws-sdk/*: ${padLeft(kib(bundle.withoutSdk), 8)}   import ${importText(bundle.imported)}` +
        `   detailed tracing: +${kib(bundle.detailed.bytes)}, import ${importText(bundle.detailed.imported)}`,
    );
  }
  log(`  the SDK's DynamoDB client alone: import ${importText(sdkClient)}`);
  log(`  what Lambda's runtime loads before the handler, into a bare node: import ${importText(runtime)}`);
  return { bundles, sdkClient, runtime };
}

/** A median import as the tables show it: wall time, its middle half, and the CPU time. */
function importText(time: ImportTime): string {
  return `${time.wallMs.toFixed(0)} ms (${time.wallSpread[0].toFixed(0)}–${time.wallSpread[1].toFixed(0)}; CPU ${time.cpuMs.toFixed(0)} ms)`;
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
    `| Lambda | bytes read at cold start (SDK bundled) | gzip | without \`@aws-sdk/*\` | over ${BUNDLE_TARGETS.routeKiB} KiB | module import: median (middle half) | its CPU time | over ${BUNDLE_TARGETS.importMs} ms | \`detailed\` tracing: more at INIT | \`detailed\`: module import |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const bundle of bundles) {
    lines.push(
      tableRow([
        bundle.name,
        bundle.bytes.toLocaleString('en-US'),
        kib(bundle.gzip),
        kib(bundle.withoutSdk),
        againstTarget(bundle.withoutSdk / 1024, bundle.route ? BUNDLE_TARGETS.routeKiB : undefined, 'KiB'),
        `${bundle.imported.wallMs.toFixed(0)} ms (${bundle.imported.wallSpread.map((value) => value.toFixed(0)).join('–')})`,
        `${bundle.imported.cpuMs.toFixed(0)} ms`,
        againstTarget(bundle.imported.wallMs, BUNDLE_TARGETS.importMs, 'ms'),
        bundle.detailed.bytes > 0 ? `+${kib(bundle.detailed.bytes)}` : '—',
        `${bundle.detailed.imported.wallMs.toFixed(0)} ms`,
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

/** The keyed route group whose cold start reads the most (SDK left out). */
function largestRoute(routes: Bundle[]): Bundle {
  return routes.reduce((largest, bundle) => (bundle.withoutSdk > largest.withoutSdk ? bundle : largest));
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
Logger and Metrics with their commons and \`@aws/lambda-invoke-store\`, 34 KiB; zod's checks; the
verbatim JSON numbers of lossless-json, 8 KiB; uuid's v7, 1.2 KiB; middy) and, in a group whose
routes read sessions, the session log (its items, codecs, paths, node index and writer, about
25 KiB).
\`decide\` was cut in session 6 to what a decision runs (177.5 KiB before): it no longer carries
agent registration, the session groups' reads, zod's record schema, or the \`module:\` and
\`lambda:\` transports (chunks read by their first call). What it holds beyond the state group,
as measured then, runs on every decision: the decision itself (decide-service.ts 6.0 KiB, the
answer's checks 1.9, the lease 1.1, the decision record 0.9, the limits on its messages 0.8),
the profile and shared documents the worker is shown (0.6), the worker call over https, the
common kind (call-worker.ts 2.9, worker-url.ts 1.0, and outbound.ts 4.9: the Standard Webhooks
signature and the rules that keep a worker's address public, checked on every connection in
AWS), and zod's object and array schemas for the body and its trigger's messages (7.6 KiB more
than the state group's zod, which checks no object; the sessions and tree groups carry them
too). Made lazy, any of them would only move its cost from INIT to the first decision. What
would bring decide under is fewer bytes in what every group shares (Powertools, the session
log), not a cut of its own.`;

/** What session 7 cut from what every keyed group shares, and so from decide (as measured then). */
const SHARED_CUTS = `Session 7 cut what every group shares (decide was 161.2 KiB before, and every group is
smaller for it): generated ids come from \`uuid\`'s v7 (1.2 KiB, against the \`uuidv7\` package's
4.5); the store's codecs and key shapes are modules imported as namespaces
(functions/store/sessions/session-item.ts, agent-item.ts, … and keys.ts), so a group bundles the encoders,
decoders and keys it calls, not every entry of an object; decide reads the registry through a
reader of the tenant's agents alone (no listing, pages or cursors: a replayed decision shows its
state through the agents the request read), and its write targets and session log are base
classes without the session groups' finding of nodes and deletes; a problem's title is made
from its code; the zod schema of an id is a module of its own; and what only rare requests
need is loaded on first use: the KMS half of the key ring (once per container), what a large
state's version changed (its merge patch and JSON Patch, which a small state's write no longer
computes), and a session delete's fences. What decide holds beyond the state group runs on
every decision: the decision itself, the worker call over https with the rules that keep a
worker's address public, and zod's object and array schemas for its body.`;

/**
 * How far the import column moved between runs of the same code, as measured when the measure
 * was made (session 6).
 */
const IMPORT_STEADINESS = `How steady the column is (session 6: three \`--bundles-only\` runs ten minutes apart on this
2-core VM, other work waiting on the CPU lock meanwhile, each import into a bare node, the
runtime's loading included): the keyed groups' medians were 68–76,
52–66 and 62–74 ms (decide 76, 66 and 68), the SDK client's alone 56, 46 and 42. Within a run
the middle halves are 2–25 ms wide and every bundle meets the same load; between runs the CPU
times move with the wall times, so what moves is the machine's own speed. Compare functions
within one run; across runs, read a change of less than about 10 ms as noise. In all three
runs every keyed group missed 50 ms, by 2–26 ms.`;

/** Section 4 of the page: what each function carries, against issue 20's targets, and why a miss is one. */
export function bundleSection({ bundles, sdkClient, runtime }: BundleRun): string {
  const routes = bundles.filter((bundle) => bundle.route && bundle.name !== 'health' && bundle.name !== 'inspector');
  const kibOf = (bytes: number) => Math.round(bytes / 1024);
  const range = (values: number[]) =>
    Math.min(...values) === Math.max(...values) ? `${values[0]}` : `${Math.min(...values)}–${Math.max(...values)}`;
  const missing = routes.filter((bundle) => kibOf(bundle.withoutSdk) > BUNDLE_TARGETS.routeKiB);
  const slow = bundles.filter((bundle) => Math.round(bundle.imported.wallMs) > BUNDLE_TARGETS.importMs);
  const traced = routes.map((bundle) => kibOf(bundle.detailed.bytes));
  const tracedImport = routes.map((bundle) => Math.round(bundle.detailed.imported.wallMs - bundle.imported.wallMs));
  const keyedImports = routes.map((bundle) => Math.round(bundle.imported.wallMs));
  const sdkShare = routes.map((bundle) => Math.round((100 * sdkClient.wallMs) / bundle.imported.wallMs));
  const ownImport = routes.map((bundle) => Math.round(bundle.imported.wallMs - sdkClient.wallMs));
  const health = bundles.find((bundle) => bundle.name === 'health');
  return `## Bundle size per Lambda

Each function of the stack (lib/entries.ts: a \`functions/http/<group>.ts\` per route group,
the authorizer, the WebSocket handler, the change hook and the webhook hook, and the webhook
queue's delivery hook) bundled as lib/agent-state.ts bundles it for deployment: esbuild,
minified ESM, target node22, AWS SDK v3 bundled (\`bundleAwsSDK: true\`: the SDK version
tested here, not the runtime's), split at dynamic imports. "Without \`@aws-sdk/*\`" is what the
same cold start reads with the SDK left to the runtime, the size issue 20's target of
${BUNDLE_TARGETS.routeKiB} KiB per route bundle is about. "Module import" is the module
part of a cold start's INIT phase: the time a fresh node takes to import the bundle ("Module
import" below says how it is measured), against the target of ${BUNDLE_TARGETS.importMs} ms. Both are at the
default tracing level; the last two columns are what the \`detailed\` level costs instead.

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
the state's writes and versions (functions/core/sessions/session-tree-service.ts; session-service.ts
adds them for the state group), so JSON Patch, merge patch and typed-field writes are in the
state group's bundle only. esbuild drops an unused function or export but never an unused
method of a class or an unused entry of an object, so decide builds readers of its own: the
agent registry's (functions/core/agents/agent-reader.ts over functions/store/agents/agent-store.ts's
\`DynamoDbTenantAgents\`, one query of the tenant's agents and shared document; registering,
changing and listing agents are agent-service.ts's, in \`agents\` only) and the session log's
(functions/store/log/session-log.ts; creating, listing and deleting sessions, the tree and the
version history are session-store.ts's, in the session groups only), and the store's codecs and
key shapes are modules imported as namespaces (functions/store/table/item-codecs.ts says why). The request schemas are written with zod/mini, whose checks
tree-shake, and a body's JSON object is checked without zod's record schema
(functions/http/edge/request.ts, \`jsonObject\`). \`health\` and \`inspector\` need no key and no
table, so they carry neither the services nor the SDK nor zod (functions/http/public.ts), and
\`health\` reads the OpenAPI document it serves from a copy the stack puts beside its bundle
(140 KiB that \`/health\` never needs).

**Loaded on first use.** What only some requests need is a chunk beside \`index.mjs\` that
node reads when it is first imported (lib/bundling.ts): decide's call of a \`lambda:\` worker
with the Lambda client, and of a \`module:\` worker (local mode only, never in AWS), the KMS
client of the sealing key with the code that calls it (functions/store/access/key-ring-kms.ts), what a
large state's version changed (functions/core/write/version-change.ts: only a version kept in pieces,
or the one after, keeps its change), the SDK's credential providers other than the environment's, the
table's API key store (behind the authorizer no route group looks a key up), a session's
delete (a \`DELETE\`, or a write that finds a delete abandoned), zod's English messages (a
refused body), and in \`agents\` the session store (read only to check a field's type
change). Nothing that nearly every request of a group uses is
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
    : `**Every keyed route group is within ${BUNDLE_TARGETS.routeKiB} KiB** in this run; the largest, ${largestRoute(routes).name}, by ${(BUNDLE_TARGETS.routeKiB - largestRoute(routes).withoutSdk / 1024).toFixed(1)} KiB (${largestRoute(routes).withoutSdk.toLocaleString('en-US')} bytes). ${SHARED_CUTS}`
}

**Module import** is measured in fresh node processes (node ${process.versions.node}), ${sdkClient.samples} imports
of each bundle at each tracing level, interleaved: each round imports every bundle once, in an
order that moves one place per round, so that load on the machine falls on every bundle alike.
Each node first does what Lambda's Node.js runtime does before it imports a handler: it starts
on an ES module file of its own (so node's loader of module files is set up) and loads
\`node:http\` for its client of the Runtime API (aws-lambda-nodejs-runtime-interface-client,
\`src/index.mjs\` and \`src/client/rapid-client.ts\`). Then it imports the bundle, as the runtime
does with \`await import()\`. The column is the median wall time of that import alone (node's
own start and the runtime's loading excluded), with the middle half of the samples (25th–75th
percentile) beside it, and the median CPU time the process spent in it (all threads: V8
compiles and collects garbage on threads of its own, so CPU may exceed wall time). What the
runtime loads first takes ${runtime.wallMs.toFixed(0)} ms (middle half ${runtime.wallSpread.map((value) => value.toFixed(0)).join('–')}) when it is imported into a bare node;
until session 7 the column counted it in every function, so compare earlier runs less that. A
bundle of next to nothing (\`health\`, ${kib(health?.withoutSdk ?? 0)}) takes ${health?.imported.wallMs.toFixed(0) ?? '–'} ms: node's reading, compiling and
linking of one module file. ${
    slow.length > 0
      ? `**The ${BUNDLE_TARGETS.importMs} ms target is missed** in this run by ${slow.length} of ${bundles.length} functions
(${slow.map((bundle) => `${bundle.name} +${Math.round(bundle.imported.wallMs) - BUNDLE_TARGETS.importMs}`).join(', ')} ms).`
      : `**The ${BUNDLE_TARGETS.importMs} ms target is met** in this run by every function (keyed groups
${range(keyedImports)} ms).`
  } The AWS SDK's DynamoDB client, the document client's commands and \`unmarshall\`, bundled
the same way and imported alone, take ${sdkClient.wallMs.toFixed(0)} ms (middle half ${sdkClient.wallSpread.map((value) => value.toFixed(0)).join('–')}, CPU
${sdkClient.cpuMs.toFixed(0)} ms): ${range(sdkShare)} % of a keyed group's import. Every keyed function needs them for its
first request; the rest of a keyed group's import, its own code and packages, is
${range(ownImport)} ms.${
    Math.round(sdkClient.wallMs) > BUNDLE_TARGETS.importMs
      ? ` The SDK's client alone is over ${BUNDLE_TARGETS.importMs} ms here, so no function that reads the table can
meet the target on this machine, whatever its own code; what is ours to cut is the rest.`
      : ''
  }

${IMPORT_STEADINESS}

${bundleTable(bundles)}
`;
}

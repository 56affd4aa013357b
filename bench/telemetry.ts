/**
 * Section 1c: what telling the operator costs a request. The handler GET and PATCH of section
 * 1b, on the same stub DynamoDB, once as they run locally (no Powertools at all) and once as in
 * a Lambda (functions/telemetry/telemetry.ts): the request's JSON log line and its EMF metrics
 * line, and at the `detailed` tracing level an X-Ray subsegment for the handler and one per
 * DynamoDB call, each sent as a datagram (bench/lambda-mode.ts). The lines are built and
 * written; only the write to the terminal is left out (in a Lambda the runtime's pipe takes
 * them). The bench's process measures the default level; the `detailed` rows come from a
 * process of their own (bench/telemetry-detailed.ts), since the X-Ray SDK it loads would slow
 * every later section of this one.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type Dependencies, dependenciesFor, useDependencies } from '../functions/http/dependencies.js';
import { keysFromEnv } from '../functions/http/edge/auth.js';
import { createStores } from '../functions/store/index.js';
import { traced } from '../functions/telemetry/telemetry.js';
import { API_KEY, log, repoRoot, STUB_ROUNDS, TENANT } from './config.js';
import type { Wired } from './fixture.js';
import { type Measured, measureAll, median, pad, padLeft, tableRow } from './measure.js';
import type { Meter } from './meter.js';
import { getHeadState, patchHeadState } from './operations.js';
import { stubDynamoDb } from './own-code.js';
import { TABLE } from './raw-sdk.js';

export interface TelemetryResult {
  /** GET without, GET with, PATCH without, PATCH with, in that order. */
  rows: Measured[];
  getMicros: number;
  patchMicros: number;
  /** Bytes of log (the request line and its metrics) per request, GET and PATCH. */
  logBytes: { get: number; patch: number };
}

/** The environment of one Lambda invocation: the function's name and a fresh trace header. */
function lambdaInvocation(on: boolean): void {
  if (!on) {
    delete process.env.AWS_LAMBDA_FUNCTION_NAME;
    delete process.env.AWS_EXECUTION_ENV;
    delete process.env._X_AMZN_TRACE_ID;
    return;
  }
  process.env.AWS_LAMBDA_FUNCTION_NAME = 'agentstate-bench';
  process.env.AWS_EXECUTION_ENV = 'AWS_Lambda_nodejs22.x';
  const root = `1-${Math.floor(Date.now() / 1000).toString(16)}-${randomBytes(12).toString('hex')}`;
  process.env._X_AMZN_TRACE_ID = `Root=${root};Parent=${randomBytes(8).toString('hex')};Sampled=1`;
}

export async function measureTelemetry(meter: Meter, client: DynamoDBClient, main: Wired): Promise<TelemetryResult> {
  log(`\n1c. telemetry: the same handler requests without and with Powertools logs, metrics and traces`);
  const resolveKey = keysFromEnv(`${TENANT}:${API_KEY}`);
  const local = dependenciesFor(createStores(await stubDynamoDb(client), TABLE), { resolveKey });
  // As in a Lambda, the client is traced when it is made (functions/store/table/client.ts); tracing
  // adds middleware to the client itself, hence a client of its own.
  const stubToTrace = await stubDynamoDb(client);
  lambdaInvocation(true);
  const inLambda = dependenciesFor(createStores(traced(stubToTrace), TABLE), { resolveKey });
  lambdaInvocation(false);

  const logged = { get: { bytes: 0, requests: 0 }, patch: { bytes: 0, requests: 0 } };
  let counting: keyof typeof logged | undefined;
  const write = process.stdout.write.bind(process.stdout);
  // Powertools writes through a Console on process.stdout: count its lines, print none.
  process.stdout.write = ((chunk: string | Uint8Array) => {
    if (counting) logged[counting].bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    return true;
  }) as typeof process.stdout.write;

  const variant = (name: string, kind: 'read' | 'write', on: boolean, deps: Dependencies) => ({
    name,
    layer: 'handler' as const,
    kind,
    make: (iteration: number) => {
      lambdaInvocation(on);
      useDependencies(deps);
      const timed = kind === 'read' ? getHeadState() : patchHeadState(iteration);
      const bucket = kind === 'read' ? 'get' : 'patch';
      return async () => {
        counting = on ? bucket : undefined;
        if (on) logged[bucket].requests++;
        await timed();
        counting = undefined;
      };
    },
  });
  let rows: Measured[];
  try {
    rows = await measureAll(
      meter,
      [
        variant('GET state (head), locally', 'read', false, local),
        variant('GET state (head), as in a Lambda', 'read', true, inLambda),
        variant('PATCH state, locally', 'write', false, local),
        variant('PATCH state, as in a Lambda', 'write', true, inLambda),
      ],
      STUB_ROUNDS,
      Math.floor(STUB_ROUNDS / 5),
    );
  } finally {
    process.stdout.write = write;
    lambdaInvocation(false);
    useDependencies(main.deps);
  }
  const [getOff, getOn, patchOff, patchOn] = rows.map((entry) => median(entry.samples) * 1000) as [number, number, number, number];
  const result = {
    rows,
    getMicros: getOn - getOff,
    patchMicros: patchOn - patchOff,
    logBytes: {
      get: Math.round(logged.get.bytes / Math.max(1, logged.get.requests)),
      patch: Math.round(logged.patch.bytes / Math.max(1, logged.patch.requests)),
    },
  };
  for (const entry of rows) log(`  ${pad(entry.operation.name, 40)} ${padLeft((median(entry.samples) * 1000).toFixed(0), 6)} µs`);
  log(
    `  telemetry: GET +${result.getMicros.toFixed(0)} µs, PATCH +${result.patchMicros.toFixed(0)} µs; ` +
      `${result.logBytes.get} and ${result.logBytes.patch} bytes of log per request`,
  );
  return result;
}

/** What section 1c measures: the default tracing level here, `detailed` in a process of its own. */
export interface TelemetryLevels {
  lambda: TelemetryResult;
  detailed: TelemetryResult;
}

/** How bench/telemetry-detailed.ts marks the line that carries its result. */
export const DETAILED_RESULT_MARKER = 'agentstate-bench-detailed-telemetry:';

/**
 * Section 1c at both levels: in this process at the stack's default (`lambda`: no X-Ray SDK),
 * then at `detailed` in a child process on the same DynamoDB Local and table, whose log lines
 * are printed here as they came.
 */
export async function measureTelemetryLevels(
  meter: Meter,
  client: DynamoDBClient,
  main: Wired,
  endpoint: string,
): Promise<TelemetryLevels> {
  const lambda = await measureTelemetry(meter, client, main);
  log('  at the detailed tracing level, in a process of its own:');
  const output = execFileSync(process.execPath, ['--import', 'tsx', join(repoRoot, 'bench', 'telemetry-detailed.ts')], {
    cwd: repoRoot,
    env: { ...process.env, BENCH_DYNAMODB_ENDPOINT: endpoint },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const lines = output.split('\n');
  const resultLine = lines.find((line) => line.startsWith(DETAILED_RESULT_MARKER));
  if (!resultLine) throw new Error(`bench/telemetry-detailed.ts printed no result:\n${output.slice(-2_000)}`);
  for (const line of lines) if (line.startsWith('  ')) log(`  ${line}`);
  const detailed = JSON.parse(resultLine.slice(DETAILED_RESULT_MARKER.length)) as TelemetryResult;
  return { lambda, detailed };
}

const medianMicros = (entry: Measured) => (median(entry.samples) * 1000).toFixed(0);

/** Section 1c of docs/benchmarks.md. */
export function telemetrySection({ lambda, detailed }: TelemetryLevels): string {
  const [getLocal, getLambda, patchLocal, patchLambda] = lambda.rows as [Measured, Measured, Measured, Measured];
  const [getLoaded, getDetailed, patchLoaded, patchDetailed] = detailed.rows as [Measured, Measured, Measured, Measured];
  const table = [
    '| operation | locally | as in a Lambda, `lambda` (the default) | locally, with the X-Ray SDK loaded | as in a Lambda, `detailed` |',
    '|---|---:|---:|---:|---:|',
    tableRow(['GET state (head)', ...[getLocal, getLambda, getLoaded, getDetailed].map(medianMicros)]),
    tableRow(['PATCH state', ...[patchLocal, patchLambda, patchLoaded, patchDetailed].map(medianMicros)]),
  ].join('\n');
  const hook = (loaded: Measured, local: Measured) => ((median(loaded.samples) - median(local.samples)) * 1000).toFixed(0);
  return `### What telemetry costs

In a Lambda every request also writes its JSON log line and its metrics (embedded metric
format, a second line). At the \`detailed\` tracing level the function traces it too: an X-Ray
subsegment for the handler and one for each DynamoDB call, each sent to the X-Ray daemon as a
datagram (docs/deploy.md, "Tracing"); at the default level, \`lambda\`, Lambda records the
trace itself and the function sends nothing. The same GET and PATCH as above, on the same stub
DynamoDB, ${STUB_ROUNDS} rounds, interleaved, medians in µs. The \`detailed\` columns run in a
process of their own (bench/telemetry-detailed.ts):

${table}

At the default level telemetry adds ${lambda.getMicros.toFixed(0)} µs to a GET and ${lambda.patchMicros.toFixed(0)} µs to a PATCH, and
${lambda.logBytes.get} and ${lambda.logBytes.patch} bytes of log (CloudWatch Logs ingestion: about USD
${((lambda.logBytes.patch / 1e9) * 0.5 * 1e6).toFixed(2)} per million PATCHes at USD 0.50 per GB). \`detailed\` adds
${(Number(medianMicros(getDetailed)) - Number(medianMicros(getLocal))).toFixed(0)} µs and ${(Number(medianMicros(patchDetailed)) - Number(medianMicros(patchLocal))).toFixed(0)} µs over running locally. Of that, ${hook(getLoaded, getLocal)} µs and ${hook(patchLoaded, patchLocal)} µs are
paid before anything is traced: the X-Ray SDK keeps its context with cls-hooked, which turns on
an async hook for the whole process as it loads, and every promise of every request then goes
through it. That is why the default level does not load it at all, not even to leave it off.`;
}

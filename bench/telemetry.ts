/**
 * Section 1c: what telling the operator costs a request. The handler GET and PATCH of section
 * 1b, on the same stub DynamoDB, once as they run locally (no Powertools at all) and once as in
 * a Lambda (functions/telemetry/telemetry.ts): the request's JSON log line, its EMF metrics
 * line, an X-Ray subsegment for the handler and one per DynamoDB call, each sent as a datagram
 * (bench/lambda-mode.ts). The lines are built and written; only the write to the terminal is
 * left out (in a Lambda the runtime's pipe takes them).
 */
import { randomBytes } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { keysFromEnv } from '../functions/http/auth.js';
import { type Dependencies, dependenciesFor, useDependencies } from '../functions/http/dependencies.js';
import { createStores } from '../functions/store/stores.js';
import { traced } from '../functions/telemetry/telemetry.js';
import { API_KEY, log, STUB_ROUNDS, TENANT } from './config.js';
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
  // As in a Lambda, the client is traced when it is made (functions/store/client.ts); tracing
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

/** Section 1c of docs/benchmarks.md. */
export function telemetrySection(result: TelemetryResult): string {
  const table = [
    '| operation | median µs |',
    '|---|---:|',
    ...result.rows.map((entry) => tableRow([entry.operation.name, (median(entry.samples) * 1000).toFixed(0)])),
  ].join('\n');
  return `### What telemetry costs

In a Lambda every request also writes its JSON log line and its metrics (embedded metric
format, a second line), and at the \`detailed\` tracing level is traced by the function too:
an X-Ray subsegment for the handler and one for each DynamoDB call, each sent to the X-Ray
daemon as a datagram (docs/deploy.md, "Tracing"; at the default level Lambda records the trace
itself, and the function sends nothing). The same GET and PATCH as above, on the same stub
DynamoDB, locally and with all of it on (\`detailed\`), ${STUB_ROUNDS} rounds, interleaved, medians:

${table}

Telemetry adds ${result.getMicros.toFixed(0)} µs to a GET and ${result.patchMicros.toFixed(0)} µs to a PATCH, and
${result.logBytes.get} and ${result.logBytes.patch} bytes of log (CloudWatch Logs ingestion: about USD
${((result.logBytes.patch / 1e9) * 0.5 * 1e6).toFixed(2)} per million PATCHes at USD 0.50 per GB).`;
}

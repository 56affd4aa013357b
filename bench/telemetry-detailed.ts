/**
 * Section 1c's `detailed` rows (bench/telemetry.ts), in a process of their own: the bench runs
 * at the stack's default tracing level, which loads no X-Ray SDK, and this process at
 * `detailed`, which loads it at start. It measures on the bench's DynamoDB Local and table
 * (`BENCH_DYNAMODB_ENDPOINT`, already written by the bench) and prints its result as one line
 * after `DETAILED_RESULT_MARKER`.
 */
import './detailed-mode.js';
import './lambda-mode.js';
import { randomBytes } from 'node:crypto';
import { useSealingKey } from '../functions/core/kernel/sealing.js';
import { dynamoDbClient } from '../functions/store/table/client.js';
import { wire } from './fixture.js';
import { Meter } from './meter.js';
import { TABLE } from './raw-sdk.js';
import { DETAILED_RESULT_MARKER, measureTelemetry } from './telemetry.js';

const endpoint = process.env.BENCH_DYNAMODB_ENDPOINT;
if (!endpoint) throw new Error('BENCH_DYNAMODB_ENDPOINT names the bench’s DynamoDB Local');
// The bench's own process has made up its sealing key by section 1c; a Lambda has its key from
// KMS after its first request, and in a Lambda none is made up (functions/store/access/key-ring.ts).
useSealingKey(randomBytes(32));
const meter = new Meter();
const client = meter.instrument(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: endpoint }));
const result = await measureTelemetry(meter, client, await wire(client, TABLE));
// Exit once the line is out: a pipe takes it asynchronously, and exiting at once cuts it off.
process.stdout.write(`${DETAILED_RESULT_MARKER}${JSON.stringify(result)}\n`, () => process.exit(0));

/**
 * `npm run bench`: what agentstate costs over the least DynamoDB work that could do the same,
 * side by side, in one process, on an in-memory DynamoDB Local (DESIGN.md section 7); the scale
 * section starts one of its own for its fixture (bench/scale-fixture.ts says why).
 *
 *   raw SDK          GetItem / conditional PutItem / Query, straight on the DynamoDB client
 *   handlers         the Lambda handlers, called in-process with API Gateway v2 events
 *   service          SessionService alone (no middy, no HTTP shape), to split the overhead
 *   stub             raw and handler again, on a DynamoDB that answers at once: our code alone
 *
 * Every DynamoDB request passes through a metered client (bench/meter.ts; one meter for both
 * DynamoDB Locals), which counts requests and consumed capacity per operation. Then: a scale run
 * (deep trees, long histories, many sessions), a concurrency run (writers on one session),
 * LangGraph's saver, memory, bundle size per Lambda, and the cost of all that in AWS.
 * Results are printed and written to docs/benchmarks.md.
 *
 * One module per section: operations.ts beside the raw-SDK baselines of raw-sdk.ts (1),
 * own-code.ts (1b), telemetry.ts (1c), large-state.ts (1d), scale.ts (2, on scale-fixture.ts), concurrency.ts (3),
 * bundles.ts (4), langgraph.ts (5, LangGraph's checkpoint saver), memory.ts (6), cost.ts (7, priced from 1 and 2);
 * fixture.ts writes what they measure on, page.ts writes the doc.
 *
 * Flags and env: `npm run bench -- --help` (bench/config.ts `USAGE`, the one list of them).
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { useDependencies } from '../functions/http/dependencies.js';
import { startDynamoDbLocal } from '../functions/local/dynamodb-local.js';
import { dynamoDbClient } from '../functions/store/table/client.js';
import { TableClient } from '../functions/store/table/table-client.js';
import { bundleSection, measureBundles } from './bundles.js';
import { measureConcurrency } from './concurrency.js';
import { benchArguments, DOC, ITERATIONS, log, ONLY, QUICK, USAGE, WARMUP, WRITE_DOC, writeDoc } from './config.js';
import { CONTENDED_HEADING, CONTENDED_WRITES, contendedWritesSection, measureContendedWrites } from './contended-writes.js';
import { costRows, costSection, costTable } from './cost.js';
import { measureErasure } from './erasure.js';
import { EXPIRY_HEADING, expirySection, measureExpiry } from './expiry.js';
import { STATE_BYTES, wire, writeSessions } from './fixture.js';
import { langGraphSection, measureLangGraph } from './langgraph.js';
import { measureGraphRuns } from './langgraph-graph.js';
import { largeStateTable, measureLargeState } from './large-state.js';
import { measureMemory } from './memory.js';
import { measureVectorSearch } from './memory-vectors.js';
import { Meter } from './meter.js';
import { measureOperations, operationsTable } from './operations.js';
import { measureOwnCode } from './own-code.js';
import { benchmarksPage, memorySection } from './page.js';
import { measurePartitionLoad, PARTITION_LOAD, partitionLoadSection } from './partition-load.js';
import { writeRawItems } from './raw-sdk.js';
import { logRetention, measureRetention } from './retention.js';
import { measureScale } from './scale.js';
import { measureTelemetryLevels } from './telemetry.js';

const { help, unknown } = benchArguments(process.argv.slice(2));
if (help || unknown.length > 0) {
  // Before anything starts: a typo must not run the whole bench and write the page.
  if (unknown.length > 0) process.stderr.write(`npm run bench: unknown ${unknown.join(', ')}\n\n`);
  process.stdout.write(`${USAGE}\n`);
  process.exit(unknown.length > 0 ? 2 : 0);
}

const started = new Date();
const loadAtStart = os.loadavg()[0] as number;
log(`agentstate benchmark — ${ITERATIONS} iterations per operation after ${WARMUP} warm-up rounds${QUICK ? ' (quick)' : ''}`);

if (process.argv.includes('--bundles-only')) {
  // Section 4 alone, spliced into the page in place of its last run.
  const section = bundleSection(await measureBundles());
  const page = readFileSync(DOC, 'utf8');
  const start = page.indexOf('## Bundle size per Lambda\n');
  const end = page.indexOf('\n## ', start + 1);
  if (start < 0 || end < 0) throw new Error(`${DOC} has no "## Bundle size per Lambda" section to replace`);
  if (WRITE_DOC) writeDoc(`${page.slice(0, start)}${section}${page.slice(end)}`);
  process.exit(0);
}

const dynamo = await startDynamoDbLocal({ dataDir: 'memory', jit: 'peak' });
process.on('exit', () => void dynamo.stop());
const meter = new Meter();
// The client the handlers get in AWS (functions/store/table/client.ts), pointed at DynamoDB Local.
const client = meter.instrument(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamo.endpoint }));

const main = await wire(client, 'bench');
useDependencies(main.deps);
meter.reset();

if (process.argv.includes('--memory-only')) {
  // Section 6 alone, spliced into the page in place of its last run.
  const section = memorySection(await measureMemory(meter, client, 'bench'));
  const page = readFileSync(DOC, 'utf8');
  const start = page.indexOf('## Memory items\n');
  // Up to the next section, whichever it is (the erasure's follows it now), or else before the bundles.
  const end = start < 0 ? page.indexOf('## Bundle size per Lambda\n') : page.indexOf('\n## ', start + 1) + 1;
  if (end <= 0) throw new Error(`${DOC} has no section after "## Memory items", nor a "## Bundle size per Lambda" to put it before`);
  if (WRITE_DOC) writeDoc(`${page.slice(0, start < 0 ? end : start)}${section}\n${page.slice(end)}`);
  await dynamo.stop();
  process.exit(0);
}
await writeSessions(main);
await writeRawItems(client);
meter.reset();

if (process.argv.includes('--operations-only')) {
  // Section 1's table and section 7 (priced from it alone, no depth rows), written into the
  // page in place of their last run; the rest of the page is kept as it is.
  const operations = await measureOperations(meter, client, main, dynamo.endpoint, STATE_BYTES);
  const page = readFileSync(DOC, 'utf8');
  const tableStart = page.indexOf('## Operations\n\n') + '## Operations\n\n'.length;
  const tableEnd = page.indexOf('\n\n', tableStart);
  const costStart = page.indexOf('## What it costs in AWS\n');
  const load = page.indexOf('## Load test');
  if (tableStart < '## Operations\n\n'.length || load < 0)
    throw new Error(`${DOC} has no operations table or load section to write around`);
  const cost = `${costSection(costRows(operations.rows, []))}\n`;
  const rest = `${page.slice(tableEnd, costStart < 0 ? load : costStart)}${cost}${page.slice(load)}`;
  if (WRITE_DOC) writeDoc(`${page.slice(0, tableStart)}${operationsTable(operations.rows)}${rest}`);
  await dynamo.stop();
  process.exit(0);
}

if (process.argv.includes('--partition-only')) {
  // The partition-load section alone (its own server and DynamoDB Local), spliced into the page.
  const section = partitionLoadSection(await measurePartitionLoad(PARTITION_LOAD));
  log(`\n${section}`);
  const page = readFileSync(DOC, 'utf8');
  const start = page.indexOf('## Partition load');
  const end = page.indexOf('## LangGraph\n');
  if (end < 0) throw new Error(`${DOC} has no "## LangGraph" to put the partition-load section before`);
  if (WRITE_DOC) writeDoc(`${page.slice(0, start < 0 ? end : start)}${section}\n${page.slice(end)}`);
  await dynamo.stop();
  process.exit(0);
}

if (process.argv.includes('--contended-only')) {
  // The contended writes' section alone (its own server and DynamoDB Local), spliced into the page.
  const section = contendedWritesSection(await measureContendedWrites(CONTENDED_WRITES));
  log(`\n${section}`);
  const page = readFileSync(DOC, 'utf8');
  const start = page.indexOf(CONTENDED_HEADING);
  const end = page.indexOf('## Partition load');
  if (end < 0) throw new Error(`${DOC} has no "## Partition load" to put the contended writes' section before`);
  if (WRITE_DOC) writeDoc(`${page.slice(0, start < 0 ? end : start)}${section}\n\n${page.slice(end)}`);
  await dynamo.stop();
  process.exit(0);
}

if (process.argv.includes('--expiry-only')) {
  // The expiry section alone, spliced into the page after the retention section.
  const section = expirySection(await measureExpiry(meter));
  const page = readFileSync(DOC, 'utf8');
  const start = page.indexOf(EXPIRY_HEADING);
  const end = page.indexOf('## Concurrency: writers on one session\n');
  if (end < 0) throw new Error(`${DOC} has no "## Concurrency: writers on one session" to put the expiry section before`);
  if (WRITE_DOC) writeDoc(`${page.slice(0, start < 0 ? end : start)}${section}\n${page.slice(end)}`);
  await dynamo.stop();
  process.exit(0);
}

if (process.argv.includes('--langgraph-only')) {
  // Section 5 alone (the saver's calls, then the graph runs on a server of their own), spliced
  // into the page in place of its last run.
  const section = langGraphSection(await measureLangGraph(meter, client));
  const page = readFileSync(DOC, 'utf8');
  const start = page.indexOf('## LangGraph\n');
  const end = page.indexOf('## Memory items\n');
  if (start < 0 || end < 0) throw new Error(`${DOC} has no "## LangGraph" section before "## Memory items" to replace`);
  if (WRITE_DOC) writeDoc(`${page.slice(0, start)}${section}\n${page.slice(end)}`);
  await dynamo.stop();
  process.exit(0);
}

if (ONLY) {
  if (ONLY.includes('scale')) await measureScale(meter, main);
  if (ONLY.includes('concurrency')) await measureConcurrency(meter, main);
  if (ONLY.includes('langgraph')) await measureLangGraph(meter, client);
  else if (ONLY.includes('langgraph-graph')) await measureGraphRuns(log);
  if (ONLY.includes('vectors')) await measureVectorSearch(meter, new TableClient(client, 'bench'));
  if (ONLY.includes('large'))
    log(`\n1d. State at scale (a 4 MiB state)\n${largeStateTable(await measureLargeState(meter, client, main)).join('\n')}`);
  if (ONLY.includes('partition')) log(`\n${partitionLoadSection(await measurePartitionLoad(PARTITION_LOAD))}`);
  if (ONLY.includes('contended')) log(`\n${contendedWritesSection(await measureContendedWrites(CONTENDED_WRITES))}`);
  if (ONLY.includes('expiry')) await measureExpiry(meter);
  if (ONLY.includes('erasure')) await measureErasure(meter, main);
  if (ONLY.includes('retention')) logRetention(await measureRetention(meter, client, main));
  await dynamo.stop();
  process.exit(0);
}

const operations = await measureOperations(meter, client, main, dynamo.endpoint, STATE_BYTES);
const own = await measureOwnCode(meter, client, main);
const telemetry = await measureTelemetryLevels(meter, client, main, dynamo.endpoint);
const largeState = await measureLargeState(meter, client, main);
log(`\n1d. State at scale (a 4 MiB state)\n${largeStateTable(largeState).join('\n')}`);
const scale = await measureScale(meter, main);
const contention = await measureConcurrency(meter, main);
const langgraph = await measureLangGraph(meter, client);
const memory = await measureMemory(meter, client, 'bench');
const erasure = await measureErasure(meter, main);
const bundles = await measureBundles();
// After the sections on this DynamoDB Local: its 20,000 writes would make the stream that much
// longer for every write after them (bench/scale-fixture.ts says why that costs).
const retention = await measureRetention(meter, client, main);
logRetention(retention);
const expiry = await measureExpiry(meter);
// Last: it runs a server of its own, which sets the handlers' environment and dependencies.
const partition = await measurePartitionLoad(PARTITION_LOAD);
log(`\n${partitionLoadSection(partition)}`);
const contended = await measureContendedWrites(CONTENDED_WRITES);
log(`\n${contendedWritesSection(contended)}`);
log(
  `\n7. What it costs in AWS (USD per million, estimated from the requests and units above)\n${costTable(costRows(operations.rows, scale.depthResults))}`,
);
const finished = new Date();

if (WRITE_DOC) {
  const run = { started, finished, loadAtStart };
  writeDoc(
    benchmarksPage({
      run,
      stateBytes: STATE_BYTES,
      operations,
      own,
      telemetry,
      largeState,
      scale,
      retention,
      expiry,
      contention,
      contended,
      partition,
      langgraph,
      memory,
      erasure,
      bundles,
    }),
  );
  log(`\nwrote ${DOC}`);
}
log(`\ndone in ${((finished.getTime() - started.getTime()) / 1000).toFixed(0)} s`);
await dynamo.stop();
process.exit(0);

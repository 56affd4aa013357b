/**
 * Section 5: LangGraph's checkpoint saver on agentstate (docs/langgraph.md). AgentStateSaver
 * runs as a graph runs it, its client's fetch answered by the handlers in-process (the event
 * the local server would build, as the other handler rows), beside the raw GetItem / PutItem
 * on the same DynamoDB Local: HTTP requests, DynamoDB requests, capacity units and latency per
 * call of the saver.
 */
import { createClient } from '@agentstate/client';
import { AgentStateSaver } from '@agentstate/langgraph';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type Checkpoint, emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { handlers } from '../functions/http/index.js';
import { API_KEY, ITERATIONS, log, WARMUP } from './config.js';
import { invoke } from './invoke.js';
import { type GraphRunRow, graphRunsText, measureGraphRuns } from './langgraph-graph.js';
import { measureAll, median, ms, type Operation, pad, padLeft, per, percentile, requestsText, tableRow } from './measure.js';
import { type Meter, totalRequests } from './meter.js';
import { RAW_GET, RAW_PUT, rawGet, rawPut } from './raw-sdk.js';

export interface SaverRow {
  name: string;
  median: number;
  p99: number;
  /** Over the raw GetItem median for reads, the PutItem median for writes. */
  ratio: number;
  baseline: 'GetItem' | 'PutItem';
  httpRequests: string;
  requests: string;
  rcu: string;
  wcu: string;
}

/** The checkpoints of the fixture thread: enough for `list` to page through its limit. */
const THREAD_CHECKPOINTS = 20;
/** The checkpoints of a longer thread, each with its step's writes: a `list` whose limit is over 50. */
const LONG_THREAD_CHECKPOINTS = 120;
const LONG_LIST_LIMIT = 100;
/** A long-lived thread: `list(limit 10)` should cost what it returns, not the thread's length. */
const HUGE_THREAD_CHECKPOINTS = 2_000;
/** About a kilobyte of channel values, as the other rows' 1 KB state. */
const NOTES = 'a line of the conversation so far. '.repeat(28);

/** A fetch that hands each request to the handlers in-process and counts them. */
function inProcessFetch(counter: { requests: number }): typeof fetch {
  return async (input, init) => {
    counter.requests += 1;
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const headers = Object.fromEntries(new Headers(init?.headers).entries());
    const body = typeof init?.body === 'string' ? init.body : undefined;
    const response = await invoke(handlers, {
      method: init?.method ?? 'GET',
      url: `${url.pathname}${url.search}`,
      headers,
      ...(body ? { body } : {}),
    });
    return new Response(response.status === 204 ? null : response.text, { status: response.status, headers: response.headers });
  };
}

/** A checkpoint one step after `step - 1`, its counter and notes changed. */
function checkpointAt(step: number): Checkpoint {
  const checkpoint = emptyCheckpoint();
  checkpoint.id = uuid6(step);
  checkpoint.channel_values = { counter: step, notes: `${step}: ${NOTES}` };
  checkpoint.channel_versions = { counter: step, notes: step };
  return checkpoint;
}

/** Section 5: the saver's calls one by one, then whole graph runs beside the peer saver. */
export interface LangGraphResults {
  rows: SaverRow[];
  graph: GraphRunRow[];
}

export async function measureLangGraph(meter: Meter, client: DynamoDBClient): Promise<LangGraphResults> {
  const http = { requests: 0 };
  const saver = new AgentStateSaver({
    client: createClient({ baseUrl: 'http://localhost:4000', apiKey: API_KEY, fetch: inProcessFetch(http), retry: false }),
    prefix: 'bench',
  });
  const metadata = { source: 'loop' as const, step: 0, parents: {} };
  const versions = { counter: 1, notes: 1 };

  // A thread of THREAD_CHECKPOINTS checkpoints to read and list; another to grow with puts.
  const read = { configurable: { thread_id: 'read', checkpoint_ns: '' } };
  let last = await saver.put(read, checkpointAt(1), metadata, versions);
  for (let step = 2; step <= THREAD_CHECKPOINTS; step++) last = await saver.put(last, checkpointAt(step), { ...metadata, step }, versions);
  const readId = last.configurable?.checkpoint_id as string;
  const long = { configurable: { thread_id: 'long', checkpoint_ns: '' } };
  let longLast = await saver.put(long, checkpointAt(1), metadata, versions);
  for (let step = 2; step <= LONG_THREAD_CHECKPOINTS; step++) {
    await saver.putWrites(longLast, [['counter', step]], `task-${step}`);
    longLast = await saver.put(longLast, checkpointAt(step), { ...metadata, step }, versions);
  }
  const huge = { configurable: { thread_id: 'huge', checkpoint_ns: '' } };
  let hugeLast = await saver.put(huge, checkpointAt(1), metadata, versions);
  for (let step = 2; step <= HUGE_THREAD_CHECKPOINTS; step++) {
    hugeLast = await saver.put(hugeLast, checkpointAt(step), { ...metadata, step }, versions);
  }
  let grown = await saver.put({ configurable: { thread_id: 'grow', checkpoint_ns: '' } }, checkpointAt(1), metadata, versions);
  let growStep = 1;

  const perCall = new Map<string, number>();
  const counted = (name: string, call: () => Promise<unknown>) => async () => {
    const before = http.requests;
    await call();
    perCall.set(name, (perCall.get(name) ?? 0) + http.requests - before);
  };
  const operations: Operation[] = [
    { name: RAW_GET, layer: 'raw', kind: 'read', make: () => () => rawGet(client) },
    { name: RAW_PUT, layer: 'raw', kind: 'write', make: () => () => rawPut(client) },
    {
      name: 'getTuple (the latest checkpoint)',
      layer: 'handler',
      kind: 'read',
      make: () => counted('getTuple (the latest checkpoint)', () => saver.getTuple(read)),
    },
    {
      name: 'getTuple (by checkpoint id)',
      layer: 'handler',
      kind: 'read',
      make: () =>
        counted('getTuple (by checkpoint id)', () => saver.getTuple({ configurable: { ...read.configurable, checkpoint_id: readId } })),
    },
    {
      name: 'put (a child checkpoint, 2 of 2 channels changed, ≈ 1 KB)',
      layer: 'handler',
      kind: 'write',
      make: () =>
        counted('put (a child checkpoint, 2 of 2 channels changed, ≈ 1 KB)', async () => {
          growStep += 1;
          grown = await saver.put(grown, checkpointAt(growStep), { ...metadata, step: growStep }, { counter: growStep, notes: growStep });
        }),
    },
    {
      name: 'putWrites (1 write)',
      layer: 'handler',
      kind: 'write',
      make: (iteration) => counted('putWrites (1 write)', () => saver.putWrites(grown, [['counter', iteration]], `task-${iteration}`)),
    },
    {
      name: `list (a thread of ${THREAD_CHECKPOINTS}, limit 10)`,
      layer: 'handler',
      kind: 'read',
      make: () =>
        counted(`list (a thread of ${THREAD_CHECKPOINTS}, limit 10)`, async () => {
          for await (const _ of saver.list(read, { limit: 10 })) {
            // Reading every tuple is the work measured.
          }
        }),
    },
    {
      name: `list (a thread of ${LONG_THREAD_CHECKPOINTS} with writes, limit ${LONG_LIST_LIMIT})`,
      layer: 'handler',
      kind: 'read',
      make: () =>
        counted(`list (a thread of ${LONG_THREAD_CHECKPOINTS} with writes, limit ${LONG_LIST_LIMIT})`, async () => {
          for await (const _ of saver.list(long, { limit: LONG_LIST_LIMIT })) {
            // Reading every tuple is the work measured.
          }
        }),
    },
    {
      name: `list (a thread of ${HUGE_THREAD_CHECKPOINTS.toLocaleString('en-US')} checkpoints, limit 10)`,
      layer: 'handler',
      kind: 'read',
      make: () =>
        counted(`list (a thread of ${HUGE_THREAD_CHECKPOINTS.toLocaleString('en-US')} checkpoints, limit 10)`, async () => {
          for await (const _ of saver.list(huge, { limit: 10 })) {
            // Reading every tuple is the work measured.
          }
        }),
    },
  ];

  log('\n5. LangGraph: AgentStateSaver over the handlers in-process');
  meter.reset();
  const measured = await measureAll(meter, operations, ITERATIONS, WARMUP);
  const byName = new Map(measured.map((entry) => [entry.operation.name, entry]));
  const rawGetMedian = median(byName.get(RAW_GET)?.samples ?? []);
  const rawPutMedian = median(byName.get(RAW_PUT)?.samples ?? []);
  const rows = measured
    .filter(({ operation }) => operation.layer !== 'raw')
    .map(({ operation, samples, cost }): SaverRow => {
      const n = samples.length;
      const read = operation.kind === 'read';
      return {
        name: operation.name,
        median: median(samples),
        p99: percentile(samples, 99),
        ratio: median(samples) / (read ? rawGetMedian : rawPutMedian),
        baseline: read ? 'GetItem' : 'PutItem',
        // Warm-up rounds count too: every round makes the same requests.
        httpRequests: per(perCall.get(operation.name) ?? 0, n + WARMUP),
        requests: `${requestsText(cost, n)} (${per(totalRequests(cost), n)})`,
        rcu: per(cost.readUnits, n),
        wcu: per(cost.writeUnits, n),
      };
    });
  log(
    `${pad('call', 58)} ${padLeft('median', 8)} ${padLeft('× raw', 7)}  ${pad('HTTP', 5)} ${pad('DynamoDB requests / call', 44)} RCU / WCU`,
  );
  for (const row of rows) {
    log(
      `${pad(row.name, 58)} ${padLeft(ms(row.median), 8)} ${padLeft(row.ratio.toFixed(2), 7)}  ${pad(row.httpRequests, 5)} ${pad(row.requests, 44)} ${row.rcu} / ${row.wcu}`,
    );
  }
  return { rows, graph: await measureGraphRuns(log) };
}

/** The section of docs/benchmarks.md. */
export function langGraphSection({ rows, graph }: LangGraphResults): string {
  const table = [
    '| call | median ms | p99 ms | × raw | HTTP requests / call | DynamoDB requests / call | RCU / call | WCU / call |',
    '|---|---:|---:|---:|---:|---|---:|---:|',
    ...rows.map((row) =>
      tableRow([
        row.name,
        ms(row.median),
        ms(row.p99),
        `${row.ratio.toFixed(2)} (${row.baseline})`,
        row.httpRequests,
        row.requests,
        row.rcu,
        row.wcu,
      ]),
    ),
  ].join('\n');
  return `## LangGraph

\`AgentStateSaver\` (docs/langgraph.md) as a graph calls it, its client's requests answered by
the handlers in-process, in the same interleaved rounds as a raw \`GetItem\` and \`PutItem\` (× raw
is over those medians: reads over \`GetItem\`, writes over \`PutItem\`). The thread read and listed
has ${THREAD_CHECKPOINTS} checkpoints of two channels (about 1 KB); each \`put\` adds a checkpoint under the last.
A \`put\` is one HTTP request (append the node with its state, \`replaceState\`); \`getTuple\` one
(the node's state and its notes); \`putWrites\` one (a note beside the checkpoint's node, outside
the session's log); \`list\` one for a page of the thread's checkpoint nodes by id, newest
first (\`GET …/nodes\`, as many as it lists), and one page of the session's history, newest
first, per 500 versions it reaches back, the first one carrying the notes of the checkpoints it
lists (\`notesOf\`, up to 200): never every node of the thread nor every node's notes (and one
more to find a thread's namespaces when the list names none). The two last rows list ${LONG_LIST_LIMIT} of a
thread of ${LONG_THREAD_CHECKPOINTS} checkpoints, each step with its writes (a note each), and 10 of a thread of
${HUGE_THREAD_CHECKPOINTS.toLocaleString('en-US')} checkpoints. RCU and WCU are what AWS would bill, counted
as the Method says (transactions and writes whose condition failed priced by DynamoDB's rules).

${table}

${graphRunsText(graph)}`;
}

/**
 * Section 5's graph runs: a 20-step LangGraph graph as LangGraph runs it, on three checkpointers
 * in one run (issue 36's target: AgentStateSaver within 1.5× of the peer saver's time):
 * - `MemorySaver`, the floor;
 * - `@rwai/langgraphjs-checkpoint-dynamodb` 0.1.6, a saver that writes DynamoDB directly (2
 *   requests a checkpoint), on the DynamoDB Local of the server below;
 * - `AgentStateSaver` over HTTP to the local server in a process of its own
 *   (bench/server-process.ts, what `npm start` runs), on that same DynamoDB Local.
 * Runs alternate between the savers, so a machine that slows down slows them alike.
 */
import { createClient } from '@agentstate/client';
import { AgentStateSaver } from '@agentstate/langgraph';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Annotation, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { QUICK } from './config.js';
import { median, ms, pad, padLeft, tableRow } from './measure.js';
import { createPeerTables, DynamoDBSaver } from './peer-saver.js';
import { startServerProcess } from './server-process.js';

const STEPS = 20;
/** Runs per saver after the warm-up ones (DynamoDB Local's JIT and the server's warm up first). */
const RUNS = QUICK ? 3 : 15;
const WARMUP_RUNS = 2;
const API_KEY = 'graph-key';
/** Issue 36: a 20-step graph at most this many times the peer saver's time. */
const GRAPH_TARGET_RATIO = 1.5;
const PEER = '@rwai/langgraphjs-checkpoint-dynamodb 0.1.6';

export interface GraphRunRow {
  saver: string;
  /** Median milliseconds of one run of the graph (STEPS + 2 checkpoints). */
  median: number;
  /** Requests of one run: HTTP requests for AgentStateSaver, DynamoDB requests for the peer. */
  requests: string;
  /** Over the peer's median. */
  ratio: number;
}

const State = Annotation.Root({
  n: Annotation<number>,
  notes: Annotation<string[]>({ reducer: (a, b) => [...a, ...b].slice(-20), default: () => [] }),
});

/** STEPS nodes in a line, each adding one to `n` and a note of about 50 bytes. */
function graphOn(checkpointer: BaseCheckpointSaver) {
  let builder = new StateGraph(State) as unknown as StateGraph<typeof State.spec>;
  for (let step = 1; step <= STEPS; step++) {
    builder = builder.addNode(`s${step}`, (state) => ({ n: state.n + 1, notes: [`step ${step}: ${'x'.repeat(40)}`] })) as typeof builder;
  }
  builder = builder.addEdge(START, 's1' as never) as typeof builder;
  for (let step = 1; step < STEPS; step++) builder = builder.addEdge(`s${step}` as never, `s${step + 1}` as never) as typeof builder;
  return builder.addEdge(`s${STEPS}` as never, END).compile({ checkpointer });
}

export async function measureGraphRuns(log: (line?: string) => void): Promise<GraphRunRow[]> {
  const server = await startServerProcess(`graph:${API_KEY}`);
  try {
    const clientConfig = {
      region: 'us-east-1',
      endpoint: server.dynamoDbEndpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    };
    const tableClient = new DynamoDBClient(clientConfig);
    const tables = await createPeerTables(tableClient, 'peer');
    tableClient.destroy();
    const peerRequests = { count: 0 };
    const httpRequests = { count: 0 };
    const counting: typeof fetch = (input, init) => {
      httpRequests.count += 1;
      return fetch(input, init);
    };
    const savers: Array<{ name: string; counter?: { count: number }; make: () => BaseCheckpointSaver }> = [
      { name: 'MemorySaver', make: () => new MemorySaver() },
      {
        name: PEER,
        counter: peerRequests,
        make: () => {
          const saver = new DynamoDBSaver({ ...tables, clientConfig });
          saver.client.middlewareStack.add(
            (next: (args: unknown) => Promise<unknown>) => async (args: unknown) => {
              peerRequests.count += 1;
              return next(args);
            },
            { step: 'initialize' },
          );
          return saver;
        },
      },
      {
        name: 'AgentStateSaver (HTTP to npm start)',
        counter: httpRequests,
        make: () =>
          new AgentStateSaver({ client: createClient({ baseUrl: server.url, apiKey: API_KEY, fetch: counting }), prefix: 'graph' }),
      },
    ];
    const samples = new Map(savers.map(({ name }) => [name, [] as Array<{ ms: number; requests: number }>]));
    for (let run = 0; run < WARMUP_RUNS + RUNS; run++) {
      // A different saver goes first each round.
      for (let turn = 0; turn < savers.length; turn++) {
        const { name, counter, make } = savers[(run + turn) % savers.length] as (typeof savers)[number];
        const graph = graphOn(make());
        const before = counter?.count ?? 0;
        const started = performance.now();
        const out = await graph.invoke({ n: 0 }, { configurable: { thread_id: `run-${run}` } });
        const took = performance.now() - started;
        if (out.n !== STEPS) throw new Error(`${name}: the graph ended at n=${out.n}, not ${STEPS}`);
        if (run >= WARMUP_RUNS) samples.get(name)?.push({ ms: took, requests: (counter?.count ?? 0) - before });
      }
    }
    const peerMedian = median((samples.get(PEER) ?? []).map((sample) => sample.ms));
    const rows = savers.map(({ name, counter }): GraphRunRow => {
      const taken = samples.get(name) ?? [];
      const time = median(taken.map((sample) => sample.ms));
      return {
        saver: name,
        median: time,
        requests: counter ? String(median(taken.map((sample) => sample.requests))) : '—',
        ratio: time / peerMedian,
      };
    });
    log(`\n5b. A ${STEPS}-step graph (${STEPS + 2} checkpoints), median of ${RUNS} runs each`);
    for (const row of rows)
      log(
        `${pad(row.saver, 44)} ${padLeft(ms(row.median), 9)} ms  ${padLeft(row.requests, 4)} requests  ${row.ratio.toFixed(2)}× the peer`,
      );
    return rows;
  } finally {
    await server.stop();
  }
}

/** The graph runs' table and its paragraph, for the LangGraph section of docs/benchmarks.md. */
export function graphRunsText(rows: readonly GraphRunRow[]): string {
  const ours = rows.find((row) => row.saver.startsWith('AgentStateSaver'));
  const verdict = ours && ours.ratio <= GRAPH_TARGET_RATIO ? 'met' : 'missed';
  const table = [
    '| checkpointer | median ms per run | requests per run | × the peer |',
    '|---|---:|---:|---:|',
    ...rows.map((row) => tableRow([row.saver, ms(row.median), row.requests, row.ratio.toFixed(2)])),
  ].join('\n');
  return `### A ${STEPS}-step graph, beside a saver that writes DynamoDB directly

A graph of ${STEPS} nodes in a line (${STEPS + 2} checkpoints, each step's writes, a note of about 50
bytes a step), invoked as LangGraph runs it, on three checkpointers in turn, ${RUNS} runs each after
${WARMUP_RUNS} to warm up: \`MemorySaver\`; \`${PEER}\`, which writes DynamoDB directly, on the
DynamoDB Local of the server; and \`AgentStateSaver\` over HTTP to that server, in a process of its
own, as \`npm start\` runs it (bench/langgraph-graph.ts). Requests are HTTP requests for
\`AgentStateSaver\`, DynamoDB requests for the peer. The target is at most
${GRAPH_TARGET_RATIO}× the peer's time: **${ours ? ours.ratio.toFixed(2) : '?'}×, ${verdict}**.

${table}
`;
}

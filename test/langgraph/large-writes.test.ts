import { AgentStateSaver } from '@agentstate/langgraph';
import { Annotation, END, Send, START, StateGraph } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * A step whose writes pass one answer's bytes (Lambda's 6 MB): 100 tasks of 100 KB each are 10 MB
 * of pending writes, notes beside one checkpoint's node. Before notes came in parts (docs/api.md),
 * `getTuple` and `list` of that checkpoint answered `413` (in AWS, API Gateway's bare `500`); now
 * the client reads the rest with `GET …/notes` and the saver returns every write.
 */
let api: RunningApi;

beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api?.stop();
});

const TASKS = 100;
const BLOB = 100_000;

describe('a fan-out whose writes pass one answer', () => {
  it(`runs a step of ${TASKS} tasks writing ${BLOB / 1000} KB each, and getTuple and list return every write`, async () => {
    // Prepare: each task writes a distinct 100 KB string; the channel keeps only their lengths, so the state stays small.
    const saver = new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix: 'large-writes' });
    const State = Annotation.Root({
      total: Annotation<number, string>({ reducer: (sum, blob) => sum + blob.length, default: () => 0 }),
    });
    const graph = new StateGraph(State)
      .addNode('fan', () => ({}))
      .addNode('task', (input: { n: number }) => ({ total: `${String(input.n).padStart(3, '0')}${'x'.repeat(BLOB - 3)}` }))
      .addEdge(START, 'fan')
      .addConditionalEdges('fan', () => Array.from({ length: TASKS }, (_, n) => new Send('task', { n })))
      .addEdge('task', END)
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'large-writes' } };

    // Act
    const out = await graph.invoke({}, config);
    const history = [];
    for await (const tuple of saver.list(config)) history.push(tuple);
    const fanned = history.find((tuple) => tuple.metadata?.step === 1);
    const tuple = await saver.getTuple(fanned?.config ?? config);

    // Assess: the run's state, and every task's write of the fanned-out checkpoint, whole, both ways.
    expect(out.total).toBe(TASKS * BLOB);
    for (const writes of [fanned?.pendingWrites, tuple?.pendingWrites]) {
      const blobs = (writes ?? []).filter(([, channel]) => channel === 'total').map(([, , value]) => value as string);
      expect(blobs).toHaveLength(TASKS);
      expect(blobs.reduce((sum, blob) => sum + blob.length, 0)).toBe(TASKS * BLOB);
      expect(new Set(blobs.map((blob) => blob.slice(0, 3))).size).toBe(TASKS);
    }
  }, 240_000);
});

import { AgentStateSaver } from '@agentstate/langgraph';
import { type CheckpointSaverTestInitializer, deltaChannelHistoryTests, validate } from '@langchain/langgraph-checkpoint-validation';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * LangGraph's own conformance suite for checkpoint savers, `@langchain/langgraph-checkpoint-
 * validation`, run against `AgentStateSaver` on the server `npm start` runs (DynamoDB Local),
 * over HTTP, behind the contract proxy. Every test of `validate()` must pass: docs/langgraph.md
 * records the count. The suite creates a saver per group of tests; each gets its own prefix, so
 * no two of them see each other's threads (the suite reuses thread ids such as "1").
 */
let api: RunningApi;
let savers = 0;

const initializer: CheckpointSaverTestInitializer<AgentStateSaver> = {
  checkpointerName: 'AgentStateSaver',
  beforeAllTimeout: 60_000,
  async beforeAll() {
    api = await startApi();
  },
  async afterAll() {
    await api?.stop();
  },
  createCheckpointer() {
    savers += 1;
    return new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix: `conformance-${savers}` });
  },
  // No destroyCheckpointer: each saver's threads are its own (its prefix), and the server, its
  // data in memory, stops with the file. Deleting every thread of every saver one by one asserted
  // nothing and took 18 s of the file's 50 alone; deleteThread is held by the suite's own test and
  // by graph.test.ts, threads.test.ts (a subgraph's namespace with writes) and saver.test.ts.
};

validate(initializer);
// Opt-in in LangGraph's package (getDeltaChannelHistory is beta): the walk up the parents that
// rebuilds a DeltaChannel from pending writes, on this saver's storage.
deltaChannelHistoryTests(initializer);

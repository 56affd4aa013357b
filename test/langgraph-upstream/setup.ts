/**
 * Set up in every LangGraph test file of an upstream run (run.ts): the factories that the
 * rewritten files call in place of `new MemorySaver()` and `new InMemoryStore(…)`. Each saver
 * and store gets a prefix of its own, so it starts empty, as a new `MemorySaver` does.
 */
import { randomUUID } from 'node:crypto';
import { AgentStateSaver, AgentStateStore } from '@agentstate/langgraph';

const baseUrl = process.env.AGENTSTATE_UPSTREAM_URL;
const apiKey = process.env.AGENTSTATE_UPSTREAM_KEY;
if (!baseUrl || !apiKey) throw new Error('run the upstream tests through test/langgraph-upstream/run.ts');

const newPrefix = () => `u${randomUUID().replaceAll('-', '').slice(0, 20)}`;

Object.assign(globalThis, {
  __makeSaver: () => new AgentStateSaver({ baseUrl, apiKey, prefix: newPrefix() }),
  __makeStore: (options: ConstructorParameters<typeof AgentStateStore>[0] = {}) =>
    new AgentStateStore({ baseUrl, apiKey, prefix: newPrefix(), ...options }),
});

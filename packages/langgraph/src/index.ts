/**
 * `@agentstate/langgraph`: LangGraph.js on agentstate. See docs/langgraph.md.
 */
export { AgentStateSaver, type AgentStateSaverOptions } from './saver.js';
export { type AgentStatePutOperation, AgentStateStore, type AgentStateStoreOptions } from './store.js';

/**
 * Stands in for `@langchain/langgraph-checkpoint-sqlite`, which one test of LangGraph's
 * `delta_channel.test.ts` imports and this repository does not install: that test fails in both
 * runs, and the file's other tests run.
 */
export const SqliteSaver = {
  fromConnString(): never {
    throw new Error('@langchain/langgraph-checkpoint-sqlite is not installed for the upstream run');
  },
};

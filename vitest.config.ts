import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

/** LangGraph's own conformance suite for checkpoint savers (test/langgraph/conformance.test.ts). */
const conformance = 'test/langgraph/conformance.test.ts';

export default defineConfig({
  // Tests import the workspace's packages by name, from source (tsconfig.json says the same to tsc).
  resolve: {
    alias: {
      '@agentstate/client': fileURLToPath(new URL('./packages/client/src/index.ts', import.meta.url)),
      '@agentstate/langgraph': fileURLToPath(new URL('./packages/langgraph/src/index.ts', import.meta.url)),
    },
  },
  test: {
    // Generous: the e2e tests start real servers (tsx + java) and the CI box may be small.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: {
      // The SDK's notice that its 2027 releases need Node 22 would repeat in every worker.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    projects: [
      {
        extends: true,
        test: {
          name: 'agentstate',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, conformance],
          // Builds the inspector page once; each file that needs DynamoDB Local starts its own
          // (test/helpers/dynamodb.ts says why none is shared).
          globalSetup: ['test/helpers/global-setup.ts'],
        },
      },
      {
        // @langchain/langgraph-checkpoint-validation defines its tests with vitest's globals
        // (describe, it, expect, …), so it gets a project of its own rather than turning them on
        // for every other file. It starts its own server, as a user's `npm start`.
        extends: true,
        test: { name: 'langgraph-conformance', include: [conformance], globals: true },
      },
    ],
  },
});

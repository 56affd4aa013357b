import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Tests import the workspace's client by name, from source (tsconfig.json says the same to tsc).
  resolve: { alias: { '@agentstate/client': fileURLToPath(new URL('./packages/client/src/index.ts', import.meta.url)) } },
  test: {
    include: ['test/**/*.test.ts'],
    // One DynamoDB Local for the whole run (2–4 s to start); each file makes its own table.
    globalSetup: ['test/helpers/global-setup.ts'],
    // Generous: the e2e tests start real servers (tsx + java) and the CI box may be small.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: {
      // The SDK's notice that its 2027 releases need Node 22 would repeat in every worker.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
  },
});

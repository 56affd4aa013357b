/**
 * knip: unused files, exports, types and dependencies (`npm test` runs it). The entry points are
 * what runs without being imported: the CLIs and scripts, the functions lib/agent-state.ts bundles
 * by path (lib/entries.ts, the one list of them), the examples; the client workspace's entry
 * is what its package.json exports. Tests, vitest's set-up, vite's inspector page and the package.json scripts are found by knip's plugins.
 */
import type { KnipConfig } from 'knip';
import { deployedEntries } from './lib/entries.js';

const config: KnipConfig = {
  workspaces: {
    '.': {
      entry: [
        'bin/*.{ts,mjs}',
        ...deployedEntries.map((entry) => entry.file),
        // Spawned by path by bench/load.ts, and by bench/telemetry.ts.
        'bench/load-server.ts',
        'bench/telemetry-detailed.ts',
        // Run by path: the Lambda runtime stand-in of test/deployed and its clock preload.
        'test/deployed/support/*.mjs',
        // `module:examples/worker.ts` is how the bench and the docs register a local worker.
        'examples/*.ts',
        // Type-level tests: checked by tsc (npm test), never run.
        'test/types/*.ts',
        // The upstream LangGraph run's vitest config and the files it names by path (run.ts).
        'test/langgraph-upstream/*.ts',
      ],
      project: ['**/*.{ts,tsx,mjs}'],
      vite: { config: ['inspector/vite.config.ts'] },
      // Run by path on the packed client (test/package/client-package.test.ts).
      ignoreDependencies: ['publint', '@arethetypeswrong/cli'],
    },
    // @agentstate/client: what its package.json exports is its entry (knip reads `exports`).
    'packages/client': {
      project: ['src/**/*.ts'],
      // An optional peer on purpose: Node 20 has no global WebSocket, so live sync imports ws
      // there when the user has it, and uses the platform's WebSocket everywhere else.
      ignoreDependencies: ['ws'],
    },
    // @agentstate/langgraph: the same, its exports are its entry.
    'packages/langgraph': {
      project: ['src/**/*.ts'],
    },
  },
  // A type exported beside the type it is part of (a member of an exported union, the payload of
  // an exported event) documents that type's shape; only a value must be used elsewhere.
  ignoreExportsUsedInFile: { interface: true, type: true },
  // DynamoDB Local runs on Java (bench/page.ts reads its version); .ci/run installs it.
  ignoreBinaries: ['java'],
};

export default config;

/**
 * knip: unused files, exports, types and dependencies (`npm test` runs it). The entry points are
 * what runs without being imported: the CLIs and scripts, the handlers lib/agent-state.ts bundles
 * by path (one per route group, from the same list), the published client, the examples. Tests,
 * vitest's set-up, vite's inspector page and the package.json scripts are found by knip's plugins.
 */
import type { KnipConfig } from 'knip';
import { routeGroups } from './functions/http/routes.js';

const config: KnipConfig = {
  entry: [
    'bin/*.{ts,mjs}',
    ...routeGroups.map((group) => `functions/http/${group}.ts`),
    'functions/http/authorizer.ts',
    'functions/ws/handler.ts',
    'functions/streams/change-hook.ts',
    // Spawned by path by bench/load.ts.
    'bench/load-server.ts',
    // `module:examples/worker.ts` is how the bench and the docs register a local worker.
    'examples/*.ts',
    // package.json exports it as ./client (built to dist/client by `npm run build:client`).
    'client/index.ts',
    // Type-level tests: checked by tsc (npm test), never run.
    'test/types/*.ts',
  ],
  project: ['**/*.{ts,tsx,mjs}'],
  // A type exported beside the type it is part of (a member of an exported union, the payload of
  // an exported event) documents that type's shape; only a value must be used elsewhere.
  ignoreExportsUsedInFile: { interface: true, type: true },
  vite: { config: ['inspector/vite.config.ts'] },
  // DynamoDB Local runs on Java (bench/page.ts reads its version); .ci/run installs it.
  ignoreBinaries: ['java'],
};

export default config;

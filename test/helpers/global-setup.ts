import { ensureInspectorBuilt } from '../../functions/local/inspector-build.js';
import { bundleGatedServer, SERVER_BUNDLE_VARIABLE } from './server-bundle.js';

/**
 * Before any test file runs: builds the inspector page once, if it is stale, and bundles the
 * server that `startApi` starts (server-bundle.ts says why). (Each file that needs DynamoDB
 * Local starts its own: ./dynamodb.ts says why none is shared by the run.) Returns the teardown.
 */
export default async function setup(): Promise<() => void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  // Built here so that the servers the test files start in parallel find it up to date instead
  // of each building it (bin/start.ts builds only a stale page).
  // One bundle for the run: the projects that start servers each run this set-up, in this one
  // process, and their teardowns all come at the end of the run.
  const made = process.env[SERVER_BUNDLE_VARIABLE] ? undefined : bundleGatedServer();
  const [bundle] = await Promise.all([made, ensureInspectorBuilt({ log: () => {} })]);
  if (!bundle) return () => {};
  // The workers vitest starts after this inherit the variable.
  process.env[SERVER_BUNDLE_VARIABLE] = bundle.file;
  return () => {
    delete process.env[SERVER_BUNDLE_VARIABLE];
    bundle.remove();
  };
}

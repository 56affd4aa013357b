import { ensureInspectorBuilt } from '../../functions/local/inspector-build.js';

/**
 * Builds the inspector page once, if it is stale, before any test file runs. (Each file that
 * needs DynamoDB Local starts its own: ./dynamodb.ts says why none is shared by the run.)
 */
export default async function setup(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  // Built here so that the servers the test files start in parallel find it up to date instead
  // of each building it (bin/start.ts builds only a stale page).
  await ensureInspectorBuilt({ log: () => {} });
}

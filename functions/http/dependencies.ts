import type { WorkerInvoker } from '../core/decide/decision-hops.js';
import type { Stores } from '../store/index.js';
import { type KeyResolver, keysFromEnv } from './edge/auth.js';
import { agentRegistryReader, agentStore, tenantAgents } from './parts/agent-store.js';
import { agents } from './parts/agents.js';
import { commits } from './parts/commits.js';
import { decide, decisionStore, workerInvoker } from './parts/decide.js';
import { documentReader, documentStore } from './parts/document-store.js';
import { erasures } from './parts/erasures.js';
import { memory } from './parts/memory.js';
import { apiKeyStore, idempotency, resolveKey } from './parts/middleware.js';
import { sessionLog } from './parts/session-log.js';
import { sessionStore } from './parts/session-store.js';
import { sessionCopier } from './parts/session-tree.js';
import { sessions } from './parts/sessions.js';
import { webhooks } from './parts/webhooks.js';
import { createWiring, type Dependencies, type Part, type Wiring } from './wiring.js';

export { type Dependencies, useDependencies } from './wiring.js';

/*
 * How every dependency of the route handlers is built: one part each, in parts/, each from the
 * parts below it, by the rule of wiring.ts. A route group names the services its routes use
 * (`createHttpHandler({ sessions }, …)`), and its bundle carries those parts only:
 * test/unit/bundle-contents.test.ts bundles every group and fails when one takes in a module its
 * routes do not use (the Lambda client outside decide, the memory store outside memory…).
 */

/**
 * Every service over the stores of one table, built by the same parts as the route groups':
 * what the benchmark and in-process tests wire themselves (`useDependencies`).
 */
export function dependenciesFor(
  stores: Stores,
  options: { env?: NodeJS.ProcessEnv; resolveKey?: KeyResolver; invokeWorker?: WorkerInvoker } = {},
): Dependencies {
  const env = options.env ?? process.env;
  const built: Array<readonly [Part<unknown>, unknown]> = [
    [sessionStore, stores.sessions],
    // The whole store is also the log that decide reads and commits through.
    [sessionLog, stores.sessions],
    [documentStore, stores.documents],
    [documentReader, stores.documents],
    [decisionStore, stores.decisions],
    [agentStore, stores.agents],
    [agentRegistryReader, stores.agents],
    [tenantAgents, stores.agents],
    [apiKeyStore, async () => stores.apiKeys],
    [idempotency, stores.idempotency],
    [resolveKey, options.resolveKey ?? keysFromEnv(env.AGENTSTATE_API_KEYS)],
  ];
  if (options.invokeWorker) built.push([workerInvoker, options.invokeWorker]);
  const wiring: Wiring = createWiring({ env, client: stores.client, table: stores.table }, built);
  return {
    sessions: wiring.use(sessions),
    // The same service: the whole one is also the sessions and the tree.
    sessionTree: wiring.use(sessions),
    copier: wiring.use(sessionCopier),
    erasures: wiring.use(erasures),
    agents: wiring.use(agents),
    decide: wiring.use(decide),
    commits: wiring.use(commits),
    memory: wiring.use(memory),
    webhooks: wiring.use(webhooks),
    idempotency: wiring.use(idempotency),
    resolveKey: wiring.use(resolveKey),
  };
}

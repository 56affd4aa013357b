import { AgentService, type WorkerUrlPolicy } from '../../core/agents/agent-service.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import type { SessionStore } from '../../core/model/ports.js';
import { moduleDirsFromEnv } from '../../workers/module-dirs.js';
import { validateWorkerUrl } from '../../workers/worker-registration.js';
import type { Part } from '../wiring.js';
import { agentStore } from './agent-store.js';
import { inLambda, lambdaWorkerAllowed } from './worker-rules.js';
import { writeQueue } from './write-queue.js';

// The agent registry as the agents group writes it (decide reads it through parts/decide.ts's agentReader).

/** Where a worker may be: checked where an agent is registered, and again at each call. */
const workerUrls: Part<WorkerUrlPolicy> = (wiring) => {
  const { env } = wiring;
  const inAws = inLambda(env);
  const moduleDirs = moduleDirsFromEnv(env);
  return (url) => {
    validateWorkerUrl(url, { allowLoopbackHttp: !inAws, moduleDirs });
    if (!lambdaWorkerAllowed(env, url)) {
      throw new AgentStateError(
        'invalid_request',
        'this lambda: worker is not allowed by the stack; add its ARN to allowedWorkerFunctionArns',
        { field: 'worker.url' },
      );
    }
  };
};

/**
 * The sessions a field's type change is checked against (their head state): the session store,
 * imported by the first such change. The agents routes read no session otherwise, so in their
 * bundle it is a chunk that no other request reads; in decide's it is already loaded.
 */
const sessionsToCheck: Part<Pick<SessionStore, 'listSessions' | 'readTip'>> = (wiring) => {
  let store: Promise<SessionStore> | undefined;
  const load = () => {
    store ??= import('./session-store.js').then(
      ({ sessionStore }) => wiring.use(sessionStore),
      (error: unknown) => {
        // Not kept: the next change tries the import again.
        store = undefined;
        throw error;
      },
    );
    return store;
  };
  return {
    listSessions: async (tenant, options) => (await load()).listSessions(tenant, options),
    readTip: async (scope, options) => (await load()).readTip(scope, options),
  };
};

export const agents: Part<AgentService> = (wiring) =>
  new AgentService(
    { agents: wiring.use(agentStore), sessions: wiring.use(sessionsToCheck), queue: wiring.use(writeQueue) },
    wiring.use(workerUrls),
  );

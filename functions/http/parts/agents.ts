import { AgentService, type WorkerUrlPolicy } from '../../core/agent-service.js';
import { AgentStateError } from '../../core/errors.js';
import type { SessionStore } from '../../core/ports.js';
import { validateWorkerUrl } from '../../workers/call-worker.js';
import { moduleDirsFromEnv } from '../../workers/module-worker.js';
import type { Part } from '../wiring.js';
import { agentStore } from './agent-store.js';

// The agent registry: the agents group, and decide, which reads the agents it calls.

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
  new AgentService({ agents: wiring.use(agentStore), sessions: wiring.use(sessionsToCheck) }, wiring.use(workerUrls));

/** Whether this process is a Lambda function (AWS mode: the runtime sets the function's name). */
export function inLambda(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.AWS_LAMBDA_FUNCTION_NAME);
}

/**
 * The one rule for `lambda:` workers, checked at registration and again at each call (the
 * stack's allow-list may have shrunk since the agent was registered).
 */
export function lambdaWorkerAllowed(env: NodeJS.ProcessEnv, url: string): boolean {
  if (!inLambda(env) || !url.startsWith('lambda:')) return true;
  return (env.AGENTSTATE_ALLOWED_WORKER_ARNS ?? '').split(',').filter(Boolean).includes(url.slice('lambda:'.length));
}

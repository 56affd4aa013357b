import { AgentService, type WorkerUrlPolicy } from '../core/agent-service.js';
import { CommitService, DEFAULT_RUN_TTL_SECONDS } from '../core/commit-service.js';
import { DecideService, type WorkerInvoker } from '../core/decide-service.js';
import { AgentStateError } from '../core/errors.js';
import type { IdempotencyStore } from '../core/ports.js';
import { SessionService } from '../core/session-service.js';
import type { SchemaSource } from '../core/write-target.js';
import type { ApiKeyStore } from '../store/api-keys.js';
import { dynamoDbClient } from '../store/client.js';
import { createStores, type Stores } from '../store/stores.js';
import { defaultTableName } from '../store/table.js';
import { recordMetric } from '../telemetry/telemetry.js';
import { callWorker, validateWorkerUrl } from '../workers/call-worker.js';
import { moduleDirsFromEnv } from '../workers/module-worker.js';
import { type KeyResolver, keysFromEnv } from './auth.js';

/** What the handlers need, built once per Lambda container (or local process). */
export interface Dependencies {
  sessions: SessionService;
  agents: AgentService;
  decide: DecideService;
  commits: CommitService;
  idempotency: IdempotencyStore;
  resolveKey: KeyResolver;
}

let current: Dependencies | undefined;

/**
 * The handlers' dependencies, created from the environment on first use, so that the local
 * server and tests can set `AGENTSTATE_*` before any handler runs:
 * `AGENTSTATE_TABLE`, `AGENTSTATE_DYNAMODB_ENDPOINT` (DynamoDB Local), `AGENTSTATE_API_KEYS`.
 */
export function dependencies(): Dependencies {
  current ??= dependenciesFromEnv(process.env);
  return current;
}

/** Replaces the dependencies, for the benchmark and tests that wire their own. */
export function useDependencies(replacement: Dependencies | undefined): void {
  current = replacement;
}

function dependenciesFromEnv(env: NodeJS.ProcessEnv): Dependencies {
  const stores = createStores(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
  return dependenciesFor(stores, { env, resolveKey: keyResolver(env, stores.apiKeys) });
}

/** Every service over the stores of one table: what the benchmark and in-process tests wire themselves. */
export function dependenciesFor(
  stores: Stores,
  options: { env?: NodeJS.ProcessEnv; resolveKey?: KeyResolver; invokeWorker?: WorkerInvoker } = {},
): Dependencies {
  const env = options.env ?? process.env;
  const workers = workerRules(env);
  const agents = new AgentService(stores, workers.checkUrl);
  const schemas: SchemaSource = (tenant, agentId) => agents.schemaFor(tenant, agentId);
  return {
    sessions: new SessionService(stores.sessions, { schemas }),
    agents,
    decide: new DecideService(stores, agents, options.invokeWorker ?? workers.invoke),
    commits: new CommitService(stores, { schemas, runTtlSeconds: runTtlSeconds(env) }),
    idempotency: stores.idempotency,
    resolveKey: options.resolveKey ?? keysFromEnv(env.AGENTSTATE_API_KEYS),
  };
}

/** `AGENTSTATE_RUN_TTL_SECONDS`: how long a run document outlives its last write. */
function runTtlSeconds(env: NodeJS.ProcessEnv): number {
  const value = Number(env.AGENTSTATE_RUN_TTL_SECONDS);
  return Number.isSafeInteger(value) && value > 0 ? value : DEFAULT_RUN_TTL_SECONDS;
}

/**
 * Behind API Gateway (`AGENTSTATE_AUTH=authorizer`) only the Lambda authorizer's verdict
 * counts, so nothing here resolves a key. Locally, keys come from `AGENTSTATE_API_KEYS` and
 * from the table, where `agentstate keys create --endpoint …` puts them.
 */
function keyResolver(env: NodeJS.ProcessEnv, keyStore: ApiKeyStore): KeyResolver {
  if (env.AGENTSTATE_AUTH === 'authorizer') return async () => null;
  const fromEnv = keysFromEnv(env.AGENTSTATE_API_KEYS);
  return async (apiKey) => (await fromEnv(apiKey)) ?? (await keyStore.resolve(apiKey));
}

/**
 * Where workers may be. In a Lambda (AWS mode) only https to public addresses and the
 * `lambda:` functions the stack allows (`AGENTSTATE_ALLOWED_WORKER_ARNS`); locally also
 * http to loopback, `module:` files from the module directories (`AGENTSTATE_MODULE_DIRS`,
 * resolved once against the directory the server runs in), and `lambda:` through
 * `AGENTSTATE_LAMBDA_ENDPOINT`.
 */
function workerRules(env: NodeJS.ProcessEnv): { checkUrl: WorkerUrlPolicy; invoke: WorkerInvoker } {
  const inAws = Boolean(env.AWS_LAMBDA_FUNCTION_NAME);
  const allowedArns = new Set((env.AGENTSTATE_ALLOWED_WORKER_ARNS ?? '').split(',').filter(Boolean));
  const moduleDirs = moduleDirsFromEnv(env);
  // The one rule for `lambda:` workers, checked at registration and again at each call (the
  // stack's allow-list may have shrunk since the agent was registered).
  const lambdaAllowed = (url: string) => !inAws || !url.startsWith('lambda:') || allowedArns.has(url.slice('lambda:'.length));
  const checkUrl: WorkerUrlPolicy = (url) => {
    validateWorkerUrl(url, { allowLoopbackHttp: !inAws, moduleDirs });
    if (!lambdaAllowed(url)) {
      throw new AgentStateError(
        'invalid_request',
        'this lambda: worker is not allowed by the stack; add its ARN to allowedWorkerFunctionArns',
        { field: 'worker.url' },
      );
    }
  };
  const invoke: WorkerInvoker = async (worker, body, timeoutMs, call) => {
    if (!lambdaAllowed(worker.url)) {
      throw new AgentStateError('worker_failed', "the agent's lambda: worker is no longer allowed by the stack");
    }
    // How long workers take and how often they fail, whatever the answer.
    const started = performance.now();
    try {
      return await callWorker({ url: worker.url, timeoutMs, ...(worker.secret ? { secret: worker.secret } : {}) }, body, {
        allowLoopbackHttp: !inAws,
        moduleDirs,
        ...(call ? { messageId: call.messageId } : {}),
        ...(env.AGENTSTATE_LAMBDA_ENDPOINT ? { lambdaEndpoint: env.AGENTSTATE_LAMBDA_ENDPOINT } : {}),
      });
    } catch (error) {
      if (AgentStateError.match(error) && (error.code === 'worker_failed' || error.code === 'worker_timeout'))
        recordMetric('WorkerFailures', 1);
      throw error;
    } finally {
      recordMetric('WorkerLatency', Math.round(performance.now() - started));
    }
  };
  return { checkUrl, invoke };
}

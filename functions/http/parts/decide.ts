import { AgentReader } from '../../core/agents/agent-reader.js';
import { DecideService } from '../../core/decide/decide-service.js';
import type { WorkerInvoker } from '../../core/decide/decision-hops.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import { DynamoDbDecisionStore } from '../../store/sessions/decision-store.js';
import { recordMetric } from '../../telemetry/telemetry.js';
import { callWorker } from '../../workers/call-worker.js';
import { moduleDirsFromEnv } from '../../workers/module-dirs.js';
import type { Part } from '../wiring.js';
import { tenantRegistry } from './agent-store.js';
import { documentReader } from './document-store.js';
import { sessionLog } from './session-log.js';
import { inLambda, lambdaWorkerAllowed } from './worker-rules.js';

// Decide alone calls workers: the only group whose bundle carries the Lambda client.

export const decisionStore: Part<DynamoDbDecisionStore> = (wiring) => new DynamoDbDecisionStore(wiring.table);

/** The agent registry as a decision reads it: no registration rules in decide's bundle. */
const agentReader: Part<AgentReader> = (wiring) => new AgentReader(wiring.use(tenantRegistry));

/**
 * How decide calls a worker. In a Lambda (AWS mode) only https to public addresses and the
 * `lambda:` functions the stack allows (`AGENTSTATE_ALLOWED_WORKER_ARNS`); locally also http
 * to loopback, `module:` files from the module directories (`AGENTSTATE_MODULE_DIRS`,
 * resolved once against the directory the server runs in), and `lambda:` through
 * `AGENTSTATE_LAMBDA_ENDPOINT`.
 */
export const workerInvoker: Part<WorkerInvoker> = (wiring) => {
  const { env } = wiring;
  const inAws = inLambda(env);
  const moduleDirs = moduleDirsFromEnv(env);
  return async (worker, body, timeoutMs, call) => {
    if (!lambdaWorkerAllowed(env, worker.url)) {
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
};

export const decide: Part<DecideService> = (wiring) =>
  new DecideService(
    { sessions: wiring.use(sessionLog), decisions: wiring.use(decisionStore), documents: wiring.use(documentReader) },
    wiring.use(agentReader),
    wiring.use(workerInvoker),
  );

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { traced } from '../../telemetry/telemetry.js';

/**
 * The bounds of every call an AWS SDK client makes (DynamoDB here; EventBridge and the API
 * Gateway Management API in the change hook): a connection that does not open within a
 * second, or an answer that does not come within three, fails that attempt. Without them the
 * SDK waits as long as the socket lives, and one endpoint that accepts and never answers
 * holds a request, or the change hook's whole batch, until its Lambda times out. A Lambda
 * worker's invocation is bounded by the worker's own timeout instead (workers/call-worker.ts).
 */
export const AWS_CALL_TIMEOUTS = { connectionTimeout: 1_000, requestTimeout: 3_000, throwOnRequestTimeout: true } as const;

/**
 * The DynamoDB client every handler uses (its calls traced in X-Ray in a Lambda). In AWS it takes region and credentials from the
 * Lambda environment; with `AGENTSTATE_DYNAMODB_ENDPOINT` (DynamoDB Local) it points there.
 */
export function dynamoDbClient(env: NodeJS.ProcessEnv): DynamoDBClient {
  const endpoint = env.AGENTSTATE_DYNAMODB_ENDPOINT;
  const client = traced(
    new DynamoDBClient({
      ...(endpoint
        ? {
            endpoint,
            region: env.AWS_REGION ?? 'us-east-1',
            // DynamoDB Local accepts any credentials, but the SDK insists on having some.
            ...(env.AWS_ACCESS_KEY_ID ? {} : { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
          }
        : {}),
      maxAttempts: 3,
      // A DynamoDB that hangs must not hold a request: give up on a silent attempt and retry, so
      // the client gets `503 unavailable` in seconds. Writes are safe to retry: each tip item
      // carries its writer's id, so a retried write that had landed is recognised (table-client.ts, isOwnWrite).
      requestHandler: AWS_CALL_TIMEOUTS,
    }),
  );
  const bound = Number(env.AGENTSTATE_DYNAMODB_MAX_IN_FLIGHT);
  if (Number.isInteger(bound) && bound > 0) {
    // After the retry middleware: each attempt waits for its turn, then has the whole of its bounds.
    client.middlewareStack.add(
      (next) => async (args) => {
        await inFlight.take(bound);
        try {
          return await next(args);
        } finally {
          inFlight.release();
        }
      },
      { step: 'finalizeRequest', priority: 'low', name: 'agentstateMaxInFlight' },
    );
  }
  return client;
}

/**
 * The DynamoDB requests of this process under way, and those waiting for one to finish, when
 * `AGENTSTATE_DYNAMODB_MAX_IN_FLIGHT` bounds them (the local server sets it; in AWS nothing
 * does). The SDK's bounds start when it sends a request, and they count its wait for one of the
 * client's 50 sockets: a burst of hundreds of requests at a DynamoDB Local that answers one at a
 * time spent its one second of connection waiting in that line, and failed attempts the server
 * never saw. Waiting here, before the SDK, each attempt keeps the whole of its bounds for the
 * server's answer. Shared by every client of the process: what the bound protects is the one
 * DynamoDB Local behind them all.
 */
const inFlight = {
  running: 0,
  waiting: [] as Array<() => void>,
  async take(bound: number): Promise<void> {
    if (this.running < bound) {
      this.running++;
      return;
    }
    // Handed its turn by `release`, which passes its place on instead of giving it back.
    await new Promise<void>((resolveTurn) => this.waiting.push(resolveTurn));
  },
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  },
};

/**
 * `lambda:<arn>` workers (call-worker.ts): a synchronous invocation of the worker's function,
 * in AWS or through a local emulator (`AGENTSTATE_LAMBDA_ENDPOINT`). With the Lambda client it
 * needs, a chunk of decide's bundle that only the first call of a lambda: worker reads.
 */
import { InvokeCommand, type InvokeCommandOutput, LambdaClient } from '@aws-sdk/client-lambda';
import { AWS_CALL_TIMEOUTS } from '../store/table/client.js';
import type { WorkerCallWording } from './worker-url.js';

/** One client per region and endpoint, for the life of the process. */
const lambdaClients = new Map<string, LambdaClient>();

function lambdaClient(region: string, endpoint: string | undefined): LambdaClient {
  const key = `${region} ${endpoint ?? ''}`;
  let client = lambdaClients.get(key);
  if (!client) {
    client = new LambdaClient({
      region,
      // The invocation itself is bounded by the worker's timeout (the abort signal); the
      // connection gets the same bound as every AWS call.
      requestHandler: { connectionTimeout: AWS_CALL_TIMEOUTS.connectionTimeout },
      ...(endpoint
        ? {
            endpoint,
            // An emulator takes any credentials, but the SDK insists on having some.
            ...(process.env.AWS_ACCESS_KEY_ID ? {} : { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
          }
        : {}),
    });
    lambdaClients.set(key, client);
  }
  return client;
}

/**
 * Invokes the worker's function synchronously with the DecisionRequest `body` and returns its
 * answer's text; a failed invocation, a function error or an answer that is not UTF-8 throws
 * `worker_failed`, worded as call-worker.ts words it. Aborting `signal` aborts the invocation.
 */
export async function callLambda(
  target: { arn: string; region: string },
  body: string,
  context: { endpoint: string | undefined; signal: AbortSignal; wording: WorkerCallWording },
): Promise<string> {
  const { signal, wording } = context;
  const { failed, excerpt } = wording;
  const client = lambdaClient(target.region, context.endpoint);
  let output: InvokeCommandOutput;
  try {
    output = await client.send(
      new InvokeCommand({
        FunctionName: target.arn,
        InvocationType: 'RequestResponse',
        Payload: new TextEncoder().encode(body),
      }),
      { abortSignal: signal },
    );
  } catch (error) {
    if (signal.aborted) throw error;
    const name = error instanceof Error ? error.name : 'Error';
    throw failed(`the Lambda invocation failed (${name})`, error);
  }
  let text = '';
  try {
    text = output.Payload ? new TextDecoder('utf-8', { fatal: true }).decode(output.Payload) : '';
  } catch {
    throw failed("the worker's Lambda answer is not UTF-8");
  }
  if (output.FunctionError) {
    let message = '';
    try {
      const payload = JSON.parse(text) as { errorType?: unknown; errorMessage?: unknown };
      message = [payload.errorType, payload.errorMessage].filter((part) => typeof part === 'string').join(': ');
    } catch {
      message = text;
    }
    const shown = excerpt(message);
    throw failed(`the worker's Lambda function failed (${output.FunctionError})${shown === '' ? '' : `: ${shown}`}`);
  }
  return text;
}
